#!/usr/bin/env bash
# The GPU check on a lent GPU machine (H100/H200, no package registry), one stage per call of
# the device tool, each inside its 10-minute limit.
#
#   Here (with apt):   tests/gpu/run.sh --pack
#       downloads the Debian packages a bare GPU machine lacks (OpenBLAS, oneDNN and the OpenCL
#       loader and headers its CMake config requires, GoogleTest, nlohmann-json, zlib's headers) into
#       .gpu/debs, and cuDNN's headers into .gpu/cudnn-include (used only where the machine has
#       cuDNN's library but not its headers). .gpu is git-ignored.
#   There (device tool, carry [".gpu"]), one stage per call:
#       tests/gpu/run.sh           = tests: build (C++ and the Python module), the C++ suite with
#                                    the CUDA tests, the Python suite
#       tests/gpu/run.sh sanitize  build, the CUDA tests under compute-sanitizer memcheck
#       tests/gpu/run.sh bench     build, the GPU benchmarks (their JSON goes into the logs)
#       tests/gpu/run.sh build     the build alone
#   Every stage builds first: a few minutes on a fresh machine, seconds on a warm one (build-gpu/
#   is still there; a machine stays warm 30 s after a call, so call again at once). Steps stop
#   ENCORE_GPU_BUDGET seconds (default 540) after the start, so the call returns inside the
#   limit and says what it cut short; a build cut short goes on where it stopped in the next
#   call on the warm machine. Under $OUT (default ./gpu-out) it writes two files: summary.txt,
#   printed last, and logs-<stage>.tar.gz with every log, the JUnit XML and the benchmark JSON.
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD

if [ "${1:-}" = "--pack" ]; then
  set -e
  rm -rf .gpu/debs .gpu/cudnn-include
  mkdir -p .gpu/debs .gpu/cudnn-include
  # oneDNN's CMake config runs find_package(OpenCL REQUIRED) (its GPU runtime is OpenCL) and
  # libdnnl.so.2 needs libOpenCL.so.1: the ICD loader, its development link and the C headers.
  (cd .gpu/debs && apt-get download \
    libopenblas0-openmp libopenblas-openmp-dev libopenblas-dev libgfortran5 \
    libdnnl2 libdnnl-dev ocl-icd-libopencl1 ocl-icd-opencl-dev opencl-c-headers \
    libgtest-dev googletest nlohmann-json3-dev zlib1g-dev)
  # MPI for the NCCL check (it bootstraps over MPI); best effort: the NCCL stage says when the
  # machine cannot run mpirun from the unpacked prefix.
  (cd .gpu/debs && apt-get download libopenmpi-dev libopenmpi3 openmpi-bin openmpi-common libpmix2 \
    libhwloc15 libevent-core-2.1-7 libevent-pthreads-2.1-7 libfabric1 libucx0 libnl-3-200 \
    libnl-route-3-200 libibverbs1 librdmacm1 libpsm2-2 libpsm-infinipath1 libxnvctrl0 libmunge2 || true)
  cuda_include=$(dirname "$(readlink -f "$(command -v nvcc)")")/../include
  cp "$cuda_include"/cudnn*.h .gpu/cudnn-include/
  du -sh .gpu/debs .gpu/cudnn-include
  exit 0
fi

stage=${1:-tests}
case "$stage" in tests | sanitize | bench | build) ;;
  *) echo "usage: $0 [--pack | tests | sanitize | bench | build]" >&2; exit 2 ;;
esac
budget=${ENCORE_GPU_BUDGET:-540}
OUT=${OUT:-$root/gpu-out}
mkdir -p "$OUT"
logs=$(mktemp -d)
summary=$OUT/summary.txt
: >"$summary"
log() { echo "== $*" | tee -a "$summary"; }
# Seconds left before the budget, minus what the bundling at the end needs.
left() { echo $((budget - SECONDS - 15)); }
# Runs a step under a timeout of at most $1 seconds and what the budget leaves; returns 124
# when it ran out of time, 125 when there was no time to start it.
bounded() {
  local cap=$1 t
  shift
  t=$(left)
  ((t > cap)) && t=$cap
  ((t < 20)) && return 125
  timeout --kill-after=10 "$t" "$@"
}
finish() {
  log "stage $stage done in ${SECONDS}s"
  tar czf "$OUT/logs-$stage.tar.gz" -C "$logs" . 2>/dev/null
  rm -rf "$logs"
  echo
  cat "$summary"
  echo "stages (one device call each, carry [\".gpu\"]): tests/gpu/run.sh [tests | sanitize | bench | build]"
}
trap finish EXIT

# 1. What the machine has.
{
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv
  command -v nvcc && nvcc --version | tail -2
  cmake --version | head -1
  g++ --version | head -1
  python3 --version
  ldconfig -p | grep -E "libdnnl|libopenblas|libOpenCL|libcudnn\.|libcublas\." || true
  python3 -c "import nvidia; print('python nvidia wheels:', list(nvidia.__path__))" 2>&1
} >"$logs/env.txt" 2>&1
log "machine: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null), stage $stage"

# 2. Dependencies: the packed Debian packages, unpacked into a private prefix (never into /).
prefix=/tmp/encore-deps
if [ ! -f "$prefix/.unpacked" ]; then
  if ! ls .gpu/debs/*.deb >/dev/null 2>&1; then
    log "no .gpu/debs: run tests/gpu/run.sh --pack on the development machine and carry .gpu"
    exit 1
  fi
  for deb in .gpu/debs/*.deb; do dpkg -x "$deb" "$prefix"; done
  touch "$prefix/.unpacked"
fi
libdir=$prefix/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH="$libdir:$libdir/openblas-openmp:${LD_LIBRARY_PATH:-}"

# cuDNN: the toolkit's or the system's; else the one in the Python nvidia-* wheels, found by
# file whatever their layout: site-packages/nvidia/cudnn/{lib,include} (nvidia-cudnn-cu12 and
# -cu13, whose nvidia.cudnn may be a namespace package without __file__), nvidia/cu13/lib
# (CUDA 13's nvidia-cublas). Headers missing there come from the pack.
cuda_args=()
cuda_root=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
if ! ls "$cuda_root"/lib64/libcudnn.so* >/dev/null 2>&1 && ! ldconfig -p | grep -q "libcudnn\.so"; then
  mapfile -t wheels < <(python3 -c "import nvidia; print('\n'.join(nvidia.__path__))" 2>/dev/null)
  cudnn_lib="" cudnn_h=""
  if ((${#wheels[@]})); then
    cudnn_lib=$(find "${wheels[@]}" -maxdepth 3 -name "libcudnn.so*" | sort | head -1)
    cudnn_h=$(find "${wheels[@]}" -maxdepth 3 -name cudnn.h | head -1)
  fi
  [ -n "$cudnn_h" ] || [ ! -f .gpu/cudnn-include/cudnn.h ] || cudnn_h=$root/.gpu/cudnn-include/cudnn.h
  if [ -z "$cudnn_lib" ] || [ -z "$cudnn_h" ]; then
    log "cuDNN not found (toolkit $cuda_root, system, Python wheels: ${wheels[*]:-none}; library '$cudnn_lib', header '$cudnn_h')"
    exit 1
  fi
  cuda_args=(-DCUDNN_LIBRARY="$cudnn_lib" -DCUDNN_INCLUDE_DIR="$(dirname "$cudnn_h")")
  log "cuDNN from $(dirname "$cudnn_lib"), headers from $(dirname "$cudnn_h")"
  # The wheels' other libraries (cuBLAS of CUDA 13 lies in nvidia/cu13/lib) for run time.
  while read -r d; do
    LD_LIBRARY_PATH="$d:$LD_LIBRARY_PATH"
  done < <(find "${wheels[@]}" -maxdepth 3 \( -name "libcudnn.so*" -o -name "libcublas.so*" \) -printf "%h\n" | sort -u)
fi

# 3. Build for Hopper, C++ first; the Python module after it, so that a Python problem costs
# the Python suite only.
configure() {
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DENCORE_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$prefix/usr" "${cuda_args[@]}" "$@"
}
# The tests stage adds the Python module after the C++ build; the others keep what is set.
python_off=()
[ "$stage" = tests ] && python_off=(-DENCORE_PYTHON=OFF)
if ! configure "${python_off[@]}" >"$logs/configure.log" 2>&1; then
  log "CONFIGURE FAILED (tail of configure.log follows)"
  tail -40 "$logs/configure.log"
  exit 1
fi
bounded "$budget" cmake --build build-gpu -j "$(nproc)" >"$logs/build.log" 2>&1
rc=$?
if ((rc != 0)); then
  log "BUILD FAILED (exit $rc, 124: out of time; tail of build.log follows)"
  tail -40 "$logs/build.log"
  exit 1
fi
log "build: ok ($((SECONDS))s so far)"

python_ok=false
if [ "$stage" = tests ]; then
  if ! python3 -c "import os, sysconfig, pybind11, numpy, pytest
assert os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h'))" >"$logs/python-build.log" 2>&1; then
    log "python module: not built (python3 lacks pybind11, numpy, pytest or its headers; see python-build.log)"
  elif configure -DENCORE_PYTHON=ON -DPython_EXECUTABLE="$(command -v python3)" >>"$logs/python-build.log" 2>&1 &&
    bounded 300 cmake --build build-gpu -j "$(nproc)" >>"$logs/python-build.log" 2>&1; then
    python_ok=true
    log "python module: ok"
  else
    log "python module: FAILED (tail of python-build.log follows); the C++ tests go on"
    tail -25 "$logs/python-build.log" | tee -a "$summary"
    configure -DENCORE_PYTHON=OFF >>"$logs/python-build.log" 2>&1
  fi
fi

# 4. The whole C++ suite, the CUDA tests included, then the Python suite.
if [ "$stage" = tests ]; then
  (cd build-gpu && bounded 420 ctest -j 8 --timeout 300 --output-on-failure \
    --output-junit "$logs/ctest.xml") >"$logs/ctest.log" 2>&1
  rc=$?
  log "ctest (exit $rc): $(grep -E 'tests passed|tests failed' "$logs/ctest.log" | tail -1)"
  grep -E "^\s+[0-9]+ - .*(Failed|Timeout|Exception|Not Run)" "$logs/ctest.log" | head -20 | tee -a "$summary"
  grep -E "SKIPPED|Skipped" "$logs/ctest.log" | grep -ci cuda | sed 's/^/   CUDA tests skipped: /' | tee -a "$summary"
  # NCCL: one GPU, one rank (mpirun -np 1, NCCL bootstraps over MPI): the collectives on the GPU,
  # and the captured step's CUDA Graph holds the NCCL kernel (tests/dist/test_nccl.cpp).
  mpirun_bin=$(command -v mpirun || ls "$prefix"/usr/bin/mpirun 2>/dev/null)
  if [ -f build-gpu/libencore_nccl.so ] && [ -n "$mpirun_bin" ]; then
    OPAL_PREFIX="$prefix/usr" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ENCORE_DIST_TIMEOUT=60 \
      bounded 120 "$mpirun_bin" -np 1 build-gpu/tests/dist/encore_dist_tests --gtest_filter='Nccl*:Collectives*' \
      >"$logs/nccl.log" 2>&1
    log "nccl (exit $?): $(grep -E '^\[  (PASSED|FAILED)' "$logs/nccl.log" | tr '\n' ' ')"
  else
    log "nccl: not run (libencore_nccl.so built: $([ -f build-gpu/libencore_nccl.so ] && echo yes || echo no); mpirun: ${mpirun_bin:-none})"
  fi
  if $python_ok; then
    PYTHONPATH=build-gpu/bindings/python bounded 240 python3 -m pytest tests/python -q \
      -p no:cacheprovider >"$logs/pytest.log" 2>&1
    log "pytest (exit $?): $(tail -1 "$logs/pytest.log")"
  fi
fi

# 5. The CUDA tests under compute-sanitizer memcheck: on PATH, in the toolkit, or in the
# nvidia-cuda-sanitizer-api wheel of the machine's Python.
if [ "$stage" = sanitize ]; then
  sanitizer=$(command -v compute-sanitizer)
  for c in "$cuda_root"/bin/compute-sanitizer "$cuda_root"/compute-sanitizer/compute-sanitizer; do
    [ -z "$sanitizer" ] && [ -x "$c" ] && sanitizer=$c
  done
  if [ -z "$sanitizer" ]; then
    sanitizer=$(python3 -c "import nvidia.cuda_sanitizer_api as m, glob; print((glob.glob(list(m.__path__)[0] + '/**/compute-sanitizer', recursive=True) or [''])[0])" 2>/dev/null)
  fi
  if [ -n "$sanitizer" ] && [ -x "$sanitizer" ]; then
    bounded 480 "$sanitizer" --tool memcheck --error-exitcode 9 \
      build-gpu/tests/encore_tests --gtest_filter='Cuda*' >"$logs/memcheck.log" 2>&1 &&
      bounded 120 "$sanitizer" --tool memcheck --error-exitcode 9 \
        build-gpu/tests/encore_cuda_tests >>"$logs/memcheck.log" 2>&1
    rc=$?
    log "compute-sanitizer memcheck: exit $rc (9: errors found, 124: out of time), $(grep -c 'Invalid' "$logs/memcheck.log") 'Invalid' lines"
    grep -E "ERROR SUMMARY|^\[  (FAILED|PASSED)" "$logs/memcheck.log" | tail -5 | tee -a "$summary"
    grep -m 5 -A 3 "Invalid" "$logs/memcheck.log" | tee -a "$summary"
  else
    log "compute-sanitizer: not found"
  fi
fi

# 6. Benchmarks, each bounded (device time is the budget).
if [ "$stage" = bench ]; then
  bench() {
    local name=$1 cap=$2
    shift 2
    bounded "$cap" "$@" --json "$logs/$name.json" >"$logs/$name.txt" 2>&1
    local rc=$?
    if ((rc == 125)); then
      log "$name: skipped (out of time; run the bench stage again on the warm machine)"
    else
      log "$name: exit $rc"
    fi
  }
  bench compare_modes_gpu 120 build-gpu/examples/compare_modes --device cuda --steps 50
  bench bench_overhead_gpu 60 build-gpu/examples/bench_overhead --device cuda
  bench compare_modes_lstm_gpu 90 build-gpu/examples/compare_modes --device cuda --steps 10 --only lstm \
    --lstm --lstm-units 512 --lstm-length 400
  bench compare_modes_lstm_composed_gpu 90 build-gpu/examples/compare_modes --device cuda --steps 10 \
    --only lstm --lstm --lstm-units 512 --lstm-length 400 --lstm-impl composed
  bench bench_kernels_gpu 90 build-gpu/examples/bench_kernels
  bench compare_modes_cpu 60 build-gpu/examples/compare_modes --device cpu --steps 30
  cut -c1-200 "$logs/compare_modes_gpu.txt" 2>/dev/null
fi
