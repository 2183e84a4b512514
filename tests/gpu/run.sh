#!/usr/bin/env bash
# The whole GPU check in one call on a lent GPU machine (H100/H200, no package registry).
#
#   Here (with apt):   tests/gpu/run.sh --pack
#       downloads the Debian packages the GPU machine lacks (OpenBLAS, oneDNN, GoogleTest,
#       nlohmann-json, zlib headers)
#       into .gpu/debs (git-ignored, ~20 MB).
#   On the GPU machine (device tool: carry [".gpu"]):   tests/gpu/run.sh
#       unpacks them into a private prefix (never into /), builds for sm_90, runs the whole C++
#       suite (the CUDA tests included), the CUDA tests under compute-sanitizer, and the GPU
#       benchmarks; logs and JSON go to $OUT (default ./gpu-out); a summary prints last.
#   tests/gpu/run.sh tests | bench   only the tests, or only the benchmarks: two calls when one
#       would pass the device tool's 10-minute limit (the build folder stays on a warm machine).
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD

if [ "${1:-}" = "--pack" ]; then
  mkdir -p .gpu/debs
  (cd .gpu/debs && apt-get download libopenblas0-pthread libopenblas-pthread-dev libopenblas-dev \
     libgfortran5 libdnnl2 libdnnl-dev libgtest-dev googletest nlohmann-json3-dev zlib1g-dev)
  ls -la .gpu/debs
  exit 0
fi

stage=${1:-all}
case "$stage" in all | tests | bench) ;; *) echo "usage: $0 [--pack | all | tests | bench]" >&2; exit 2 ;; esac
OUT=${OUT:-$root/gpu-out}
mkdir -p "$OUT"
log() { echo "== $*" | tee -a "$OUT/summary.txt"; }
: >"$OUT/summary.txt"

# 1. What the machine has.
{
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv
  nvcc --version | tail -2
  cmake --version | head -1
  g++ --version | head -1
  ldconfig -p | grep -E "libdnnl|libopenblas|libcudnn\.|libcublas\." || true
} >"$OUT/env.txt" 2>&1
log "machine: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)"

# 2. Dependencies into a private prefix.
prefix=/tmp/encore-deps
if [ -d .gpu/debs ]; then
  for deb in .gpu/debs/*.deb; do dpkg -x "$deb" "$prefix"; done
fi
libdir=$prefix/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH="$libdir:$libdir/openblas-pthread:${LD_LIBRARY_PATH:-}"
# cuDNN and cuBLAS: the toolkit's, else the ones inside the Python nvidia-* wheels.
cuda_hints=()
if ! ls /usr/local/cuda/lib64/libcudnn.so* >/dev/null 2>&1; then
  for pkg in cudnn cublas; do
    d=$(python3 -c "import nvidia.$pkg, os; print(os.path.dirname(nvidia.$pkg.__file__ or nvidia.$pkg.__path__[0]))" 2>/dev/null)
    [ -n "$d" ] || d=$(python3 -c "import nvidia.$pkg as m; print(list(m.__path__)[0])" 2>/dev/null)
    if [ -n "$d" ]; then
      export LD_LIBRARY_PATH="$d/lib:$LD_LIBRARY_PATH"
      [ "$pkg" = cudnn ] && cuda_hints+=(-DCUDNN_LIBRARY="$(ls "$d"/lib/libcudnn.so* | head -1)" -DCUDNN_INCLUDE_DIR="$d/include")
    fi
  done
fi

# 3. Build for Hopper; the Python extension too when the machine's Python can build and test it.
python_args=()
if python3 -c "import os, sysconfig, pybind11, numpy, pytest
assert os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h'))" >/dev/null 2>&1; then
  python_args=(-DENCORE_PYTHON=ON -DPython_EXECUTABLE="$(command -v python3)")
fi
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DENCORE_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$prefix/usr" "${cuda_hints[@]}" "${python_args[@]}" \
  >"$OUT/configure.log" 2>&1
if ! cmake --build build-gpu -j "$(nproc)" >"$OUT/build.log" 2>&1; then
  log "BUILD FAILED (tail of build.log follows)"
  tail -40 "$OUT/build.log"
  exit 1
fi
log "build: ok"

if [ "$stage" != bench ]; then
# 4. The whole C++ suite, CUDA tests included.
(cd build-gpu && ctest -j 8 --output-on-failure --output-junit "$OUT/ctest.xml") >"$OUT/ctest.log" 2>&1
log "ctest: $(grep -E 'tests passed|tests failed' "$OUT/ctest.log" | tail -1)"
grep -E "^\s+[0-9]+ - .*(Failed|Timeout|Exception)" "$OUT/ctest.log" | head -20 | tee -a "$OUT/summary.txt"

# The Python suite (its GPU tests included) against the build tree's package.
if ((${#python_args[@]})); then
  PYTHONPATH=build-gpu/bindings/python python3 -m pytest tests/python -q -p no:cacheprovider \
    >"$OUT/pytest.log" 2>&1
  log "pytest: $(tail -1 "$OUT/pytest.log")"
else
  log "pytest: skipped (python3 lacks pybind11, numpy, pytest or its headers)"
fi

# 5. The CUDA tests under compute-sanitizer memcheck.
# On PATH, in the toolkit, or in the nvidia-cuda-sanitizer-api wheel of the machine's Python.
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer \
  /usr/local/cuda*/compute-sanitizer/compute-sanitizer 2>/dev/null | head -1)
if [ -z "$sanitizer" ]; then
  sanitizer=$(python3 -c "import nvidia.cuda_sanitizer_api as m, glob; print((glob.glob(list(m.__path__)[0] + '/**/compute-sanitizer', recursive=True) or [''])[0])" 2>/dev/null)
fi
if [ -n "$sanitizer" ] && [ -x "$sanitizer" ]; then
  "$sanitizer" --tool memcheck --error-exitcode 9 build-gpu/tests/encore_tests --gtest_filter='Cuda*' \
    >"$OUT/memcheck.log" 2>&1
  log "compute-sanitizer memcheck: exit $? ($(grep -c 'Invalid\|ERROR SUMMARY: [1-9]' "$OUT/memcheck.log") error lines)"
  grep "ERROR SUMMARY" "$OUT/memcheck.log" | tail -1 | tee -a "$OUT/summary.txt"
else
  log "compute-sanitizer: not found"
fi

fi

if [ "$stage" != tests ]; then
# 6. Benchmarks (device time is the budget: keep them bounded).
bench() {
  local name=$1
  shift
  timeout 240 "$@" >"$OUT/$name.txt" 2>&1
  log "$name: exit $?"
}
bench bench_overhead_gpu build-gpu/examples/bench_overhead --device cuda --json "$OUT/bench_overhead_gpu.json"
bench compare_modes_gpu build-gpu/examples/compare_modes --device cuda --steps 50 --json "$OUT/compare_modes_gpu.json"
bench compare_modes_lstm_gpu build-gpu/examples/compare_modes --device cuda --steps 10 --only lstm --lstm \
  --lstm-units 512 --lstm-length 400 --json "$OUT/compare_modes_lstm_gpu.json"
bench compare_modes_lstm_composed_gpu build-gpu/examples/compare_modes --device cuda --steps 10 --only lstm --lstm \
  --lstm-units 512 --lstm-length 400 --lstm-impl composed --json "$OUT/compare_modes_lstm_composed_gpu.json"
if [ -x build-gpu/examples/bench_kernels ]; then
  bench bench_kernels_gpu build-gpu/examples/bench_kernels --json "$OUT/bench_kernels_gpu.json"
fi
bench compare_modes_cpu build-gpu/examples/compare_modes --device cpu --steps 30 --json "$OUT/compare_modes_cpu.json"
fi

# 7. Summary last (the device tool returns the end of the output).
echo
cat "$OUT/compare_modes_gpu.txt" 2>/dev/null | cut -c1-200
echo
cat "$OUT/summary.txt"
