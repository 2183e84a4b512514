#!/usr/bin/env bash
# Configures and builds encore in build/ (Release; the CUDA backend when nvcc is found).
# Extra arguments go to CMake's configure step, e.g. -DENCORE_CUDA=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."

launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
cmake --preset default "${launcher[@]}" "$@" >/dev/null
cmake --build --preset default
