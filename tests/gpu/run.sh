#!/usr/bin/env bash
# The GPU check (issue 27) on a lent GPU machine: one H100 or H200, a CUDA 13 driver, 16 cores,
# no package registry, at most 10 minutes a command. Everything runs in one call: fail-fast,
# each step bounded, a table printed last.
#
# Built here, carried there: the lent machine then spends no device time compiling, and the
# build (with the oneDNN and OpenBLAS it lacks) packs into ~20 MiB of the 64 MiB that travel.
#
#   Here:   tests/gpu/run.sh pack [BUILD_DIR]
#             builds what the check runs for sm_90 into build-gpu/ (the C++ tests, the CUDA
#             tests, the examples, the Python module for the lent machine's Python 3.12: from
#             $ENCORE_GPU_PYTHON, python3.12 or pyenv's 3.12), stages it with the shared
#             libraries the lent machine lacks, writes .gpu/encore-gpu.tar.xz, checks that the
#             working tree and .gpu fit the 64 MiB the device tool carries, and dry-runs the
#             pack here. Needs .venv (scripts/python_env.sh) for pybind11. With BUILD_DIR it
#             packs that sm_90 build as it is instead (no Python 3.12 module: the python and
#             bench stages fail there).
#           tests/gpu/run.sh --dry-run [BUILD_DIR]
#             the check against an unpacked pack, or a build folder (staged by links), stopping
#             after the device stage: without a GPU it stops at "no CUDA device" (exit 3) within
#             seconds. CTest's gpu_check_dry_run runs it on build/.
#   There:  the device tool's run with command "tests/gpu/run.sh", carry [".gpu"], timeout_s 570:
#             unpacks .gpu/encore-gpu.tar.xz into /tmp/encore-gpu and runs the stages, in order
#             (or those named: tests/gpu/run.sh python bench):
#     env       what the machine has (GPU, driver, runtime, toolkit, libraries, Python, tools)
#     device    every carried binary's libraries resolve and show_config reports a usable sm_90
#               device; else the check stops at once (exit 3)
#     first     CudaCaptureFirstUse in a process of its own: a capture is its first CUDA work
#     python    the Python CUDA-graph tests (tests/python/test_gpu.py) alone
#     cuda      the CUDA C++ tests (encore_tests filtered, encore_cuda_tests)
#     nccl      the NCCL tests (encore_dist_tests Nccl.*) in a world of one on NCCL alone
#               (ENCORE_DIST=nccl: the machine has no MPI), the plugin from plugins/ and NCCL
#               from the machine (PyTorch's nvidia-nccl wheel)
#     train     the CUDA training examples (train_small, train_lstm)
#     sanitize  compute-sanitizer memcheck on the capture tests, racecheck on the graph tests
#     bench     bench_overhead, compare_modes, examples/bench_gpu_peers.py (PyTorch's peer)
#   A new stage: write stage_<name> below and add <name> to STAGES ($OUT has no file left free).
#
# ENCORE_EXPECT_CUDA=1 is set for the tests: a CUDA test that finds no GPU fails instead of
# skipping, and report.py counts any such skip as a failure. Steps stop ENCORE_GPU_BUDGET
# seconds (default 540) after the start. Under $OUT (default ./gpu-out), at most 8 plain files:
# summary.txt (the table, printed last), results.json, env.txt, tests.log, python.log,
# sanitizer.log, bench.log, nccl.log. Exit 0: all passed; 3: no usable CUDA device; 1: a
# stage failed.
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
here=$root/tests/gpu
STAGES=(env device first python cuda nccl train sanitize bench)
PACK=$root/.gpu/encore-gpu.tar.xz
# Libraries a bare lent machine lacks: carried and always used; and carried but used only where
# the machine has none (a system copy is newer, and other libraries in the process may need it).
CARRIED_LIBS=(libdnnl.so.2 libopenblas.so.0)
FALLBACK_LIBS=(libgfortran.so.5 libquadmath.so.0 libgomp.so.1 libOpenCL.so.1)
# What the machine provides: the C and C++ runtimes and zlib from its system, CUDA's from the
# toolkit or the Python wheels.
PROVIDED='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|libz|libcudart|libcublas|libcublasLt|libcudnn|libnccl|libencore|libencore_cuda)\.'
BINARIES=(encore_tests encore_cuda_tests encore_dist_tests encore_show_config compare_modes bench_overhead train_small train_lstm)
MAX_CARRY=$((64 << 20))

say() { echo "== $*"; }
die() {
  echo "error: $*" >&2
  exit 1
}

# ---- pack (here) ---------------------------------------------------------------------------

find_python312() {
  local c
  for c in "${ENCORE_GPU_PYTHON:-}" "$(command -v python3.12 2>/dev/null)" \
    "$(pyenv root 2>/dev/null)"/versions/3.12*/bin/python3.12 "$HOME"/.pyenv/versions/3.12*/bin/python3.12; do
    [ -n "$c" ] && [ -x "$c" ] && "$c" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null && {
      echo "$c"
      return 0
    }
  done
  return 1
}

# Copies (or, for a dry run of a build folder, links) what the check runs into $2.
stage_build() {
  local build=$1 dir=$2 mode=$3 put f lib path
  put() { if [ "$mode" = link ]; then ln -sf "$1" "$2"; else cp -L "$1" "$2"; fi; }
  mkdir -p "$dir/bin" "$dir/lib" "$dir/lib-fallback" "$dir/plugins" "$dir/python/encore"
  for f in "${BINARIES[@]}"; do
    path=$(find "$build/tests" "$build/examples" -maxdepth 2 -name "$f" -type f 2>/dev/null | head -1)
    [ -n "$path" ] || die "$build has no $f: build it (tests/gpu/run.sh pack does)"
    put "$path" "$dir/bin/$f"
  done
  for f in libencore.so libencore_cuda.so; do
    [ -f "$build/$f" ] || die "$build has no $f (a build with the CUDA backend)"
    put "$build/$f" "$dir/lib/$f"
  done
  # Outside lib/: libencore does not find it there by itself, and NCCL comes from the machine,
  # which the device stage does not require (the nccl stage names it: ENCORE_NCCL_PLUGIN).
  [ -f "$build/libencore_nccl.so" ] && put "$build/libencore_nccl.so" "$dir/plugins/libencore_nccl.so"
  for f in "$build"/bindings/python/encore/_C.*.so "$build"/bindings/python/encore/_C.pyi "$build"/bindings/python/encore/_ops.py; do
    [ -f "$f" ] && put "$f" "$dir/python/encore/"
  done
  # The libraries the machine may lack, where this machine's loader finds them.
  local needed
  needed=$(ldd "$build/libencore.so" "$build/libencore_cuda.so" "$dir"/plugins/* "$dir"/bin/* 2>/dev/null | awk '/=> \//{print $1" "$3}' | sort -u)
  for lib in "${CARRIED_LIBS[@]}" "${FALLBACK_LIBS[@]}"; do
    path=$(awk -v l="$lib" '$1 == l {print $2; exit}' <<<"$needed")
    [ -n "$path" ] || continue
    if [[ " ${CARRIED_LIBS[*]} " == *" $lib "* ]]; then put "$path" "$dir/lib/$lib"; else put "$path" "$dir/lib-fallback/$lib"; fi
  done
  # Anything else the binaries need is either provided there or a gap in the lists above.
  local unknown
  unknown=$(awk '{print $1}' <<<"$needed" | grep -Ev "$PROVIDED" | while read -r lib; do
    [[ " ${CARRIED_LIBS[*]} ${FALLBACK_LIBS[*]} " == *" $lib "* ]] || echo "$lib"
  done)
  [ -z "$unknown" ] || die "the binaries need libraries no list in tests/gpu/run.sh covers: $unknown"
}

pack() {
  local build=$root/build-gpu stage_dir size tree module
  if [ -n "${1:-}" ]; then  # a build folder as it is (sm_90; its Python module must be for 3.12)
    build=$(readlink -f "$1")
    ls "$build"/bindings/python/encore/_C.cpython-312-*.so >/dev/null 2>&1 ||
      echo "warning: $build has no Python module for Python 3.12: the python and bench stages will fail there" >&2
  else
    build_for_pack "$build"
  fi
  stage_dir=$(mktemp -d)
  stage_build "$build" "$stage_dir/encore-gpu" copy
  {
    echo "commit $(git rev-parse HEAD)$(git diff --quiet HEAD -- . ':!.gpu' || echo ' (with uncommitted changes)')"
    echo "built $(date -u +%FT%TZ) on $(uname -n): $(g++ --version | head -1); $(nvcc --version | tail -1)"
    module=$(ls "$stage_dir"/encore-gpu/python/encore/_C.*.so 2>/dev/null)
    echo "python module: ${module##*/}"
    (cd "$stage_dir/encore-gpu" && find . -type f ! -name MANIFEST -printf '%s\t%p\n' | sort -k2)
  } >"$stage_dir/encore-gpu/MANIFEST"
  mkdir -p "$root/.gpu"
  rm -rf "$root/.gpu/debs" "$root/.gpu/cudnn-include"  # what an older pack carried
  say "compress (xz; a minute or two)"
  tar -C "$stage_dir" -cf - encore-gpu | xz -T0 -6 >"$PACK.tmp" && mv "$PACK.tmp" "$PACK" || die "compressing failed"
  rm -rf "$stage_dir"
  size=$(du -sb "$root/.gpu" | cut -f1)
  tree=$(git ls-files -z -co --exclude-standard | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
  say "pack $((size >> 20)) MiB, working tree $((tree >> 20)) MiB: $(((size + tree) >> 20)) of the $((MAX_CARRY >> 20)) MiB that travel"
  ((size + tree <= MAX_CARRY)) || die "too large to carry"
  say "dry run of the pack"
  local rc=0
  "$0" --dry-run || rc=$?
  ((rc == 0 || rc == 3)) || die "the dry run of the pack failed (exit $rc)"
  say "ready: on a lent GPU machine, the device tool's run with command \"tests/gpu/run.sh\", carry [\".gpu\"], timeout_s 570"
}

# Configures and builds what the check runs into $1: sm_90, the examples, the Python module for
# the lent machine's Python 3.12.
build_for_pack() {
  local build=$1 py312 pybind launcher=()
  py312=$(find_python312) || die "no Python 3.12 here for the lent machine's python3 (set ENCORE_GPU_PYTHON)"
  pybind=${ENCORE_PYBIND11_DIR:-$("$root"/.venv/bin/python -m pybind11 --cmakedir 2>/dev/null)} ||
    die "no pybind11: run scripts/python_env.sh (or set ENCORE_PYBIND11_DIR)"
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  say "configure $build (sm_90, Python module for $py312)"
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DENCORE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DENCORE_PYTHON=ON -DENCORE_EXAMPLES=ON -DPython_EXECUTABLE="$py312" -Dpybind11_DIR="$pybind" "${launcher[@]}" \
    >"$build.configure.log" 2>&1 || { tail -30 "$build.configure.log"; die "configure failed"; }
  say "build (slow on a loaded machine; ccache helps)"
  cmake --build "$build" --target encore encore_cuda encore_nccl _C "${BINARIES[@]}" || die "build failed"
}

# ---- the check ------------------------------------------------------------------------------

OUT=${OUT:-$root/gpu-out}
budget=${ENCORE_GPU_BUDGET:-540}
dry_run=false
source_dir=""
work=""
stage_dir=""

# Seconds left for a step: its cap, or what the budget leaves after the report's 15 seconds.
left() {
  local t=$((budget - SECONDS - 15))
  ((t > $1)) && t=$1
  echo "$t"
}
# Runs a command bounded by left(); 124: it ran out of time, 125: no time was left to start it.
bounded() {
  local t
  t=$(left "$1")
  shift
  ((t < 10)) && return 125
  timeout --kill-after=10 "$t" "$@"
}
record() {  # stage status seconds detail
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$work/stages.tsv"
  printf '%-9s %-7s %4ss  %s\n' "$1" "$2" "$3" "$4"
}
# The verdict of a stage that wrote JUnit XML: ok when the command exited 0 and report.py finds
# no failure and no test skipped for want of a GPU; its lines beyond the first go to stdout.
junit_verdict() {  # stage start rc files...
  local stage=$1 start=$2 rc=$3 line verdict
  shift 3
  line=$(python3 "$here/report.py" junit "$@" 2>&1)
  verdict=$?
  if ((rc == 0 && verdict == 0)); then
    record "$stage" ok $((SECONDS - start)) "$(head -1 <<<"$line")"
    return 0
  fi
  ((rc == 124)) && line="out of time; $line"
  record "$stage" FAIL $((SECONDS - start)) "$(head -1 <<<"$line") [exit $rc]"
  sed -n '2,$p' <<<"$line"
  return 1
}

unpack() {
  if [ -n "$source_dir" ]; then  # a build folder, staged by links (dry run here)
    stage_dir=$(mktemp -d)/encore-gpu
    stage_build "$source_dir" "$stage_dir" link
    return
  fi
  [ -f "$PACK" ] || die "no $PACK: run tests/gpu/run.sh pack on the development machine, and carry .gpu"
  stage_dir=/tmp/encore-gpu
  if [ ! -f "$stage_dir/.unpacked" ] || [ "$PACK" -nt "$stage_dir/.unpacked" ]; then
    rm -rf "$stage_dir" && mkdir -p /tmp && xz -dc "$PACK" | tar -C /tmp -xf - ||
      python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall('/tmp')" "$PACK" ||
      die "cannot unpack $PACK"
    touch "$stage_dir/.unpacked"
  fi
}

# The library path: the carried libraries; the fallbacks the system lacks; the CUDA libraries
# from the system, the toolkit or the Python wheels (PyTorch's nvidia-* packages).
library_path() {
  # Outputs are read whole: under pipefail, `grep -q` closing a pipe early fails the writer (SIGPIPE).
  local path=$stage_dir/lib lib d cache
  cache=$(ldconfig -p 2>/dev/null)
  for lib in "${FALLBACK_LIBS[@]}"; do
    if [ -e "$stage_dir/lib-fallback/$lib" ] && ! grep -q "^\s*$lib " <<<"$cache"; then
      path=$path:$stage_dir/lib-fallback
      break
    fi
  done
  local cuda_root
  cuda_root=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)")")")
  for lib in libcudart.so.13 libcublas.so.13 libcudnn.so.9 libnccl.so.2; do
    grep -q "^\s*$lib " <<<"$cache" && continue
    d=$(find "$cuda_root/lib64" "$cuda_root/lib" /usr/local/cuda/lib64 -maxdepth 1 -name "$lib" 2>/dev/null | head -1)
    if [ -z "$d" ]; then
      d=$(python3 -c "import nvidia, os; print('\n'.join(nvidia.__path__))" 2>/dev/null |
        while read -r w; do find "$w" -maxdepth 3 -name "$lib" 2>/dev/null; done | head -1)
    fi
    [ -n "$d" ] && [[ ":$path:" != *":$(dirname "$d"):"* ]] && path=$path:$(dirname "$d")
  done
  echo "$path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

# ---- stages ---------------------------------------------------------------------------------

stage_env() {
  local start=$SECONDS
  {
    echo "# $(date -u +%FT%TZ) $(uname -a)"
    head -3 "$stage_dir/MANIFEST" 2>/dev/null
    timeout 20 nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,compute_mode --format=csv 2>&1
    timeout 10 nvidia-smi -L 2>&1
    echo "nproc $(nproc); $(free -g | awk '/Mem/{print $2" GiB"}'); $(ldd --version 2>&1 | head -1)"
    command -v nvcc && nvcc --version | tail -2
    cmake --version 2>&1 | head -1
    command -v compute-sanitizer && timeout 20 compute-sanitizer --version 2>&1 | tail -1
    ldconfig -p | grep -E "libdnnl|libopenblas|libgomp|libgfortran|libOpenCL|libcudnn\.so|libcublas\.so|libcudart\.so"
    timeout 60 python3 -c "
import sys; print('python', sys.version.split()[0], sys.executable)
for m in ('numpy', 'pytest', 'torch'):
    try:
        mod = __import__(m); print(m, mod.__version__)
    except Exception as e: print(m, 'missing:', e)
try:
    import torch; print('torch cuda', torch.version.cuda, 'available', torch.cuda.is_available(), 'cudnn', torch.backends.cudnn.version())
except Exception as e: print('torch:', e)
" 2>&1
    echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  } >"$OUT/env.txt" 2>&1
  python3 - "$OUT/env.txt" "$work/env.json" <<'EOF' 2>/dev/null
import json, re, sys
text = open(sys.argv[1]).read()
def find(pattern):
    m = re.search(pattern, text, re.MULTILINE)
    return m.group(1).strip() if m else None
kernel = find(r"^# \S+ Linux \S+ (\S+)")
json.dump({"gpu": find(r"^name, .*\n(.*?),"), "driver": find(r"^name, .*\n(?:[^,]*,){2}\s*([^,]*)"),
           "kernel": kernel, "runtime": "gVisor" if kernel and kernel.startswith("4.4.0") else "Firecracker?",
           "nvcc": find(r"release (\S+),"), "python": find(r"^python (\S+)"), "torch": find(r"^torch (\d\S*)"),
           "sanitizer": find(r"^(/\S*compute-sanitizer)$")}, open(sys.argv[2], "w"))
EOF
  record env ok $((SECONDS - start)) "$(python3 -c "import json, sys; d = json.load(open(sys.argv[1]))
print(f\"{d['gpu'] or 'no GPU seen'}, driver {d['driver']}, kernel {d['kernel']} ({d['runtime']}), nvcc {d['nvcc']}, python {d['python']}, torch {d['torch']}\")" "$work/env.json" 2>&1 | tail -1)"
}

stage_device() {
  local start=$SECONDS missing config
  missing=$(ldd "$stage_dir"/lib/*.so* "$stage_dir"/bin/* "$stage_dir"/python/encore/*.so 2>/dev/null | grep "not found" | sort -u | tr -s ' \t' ' ')
  if [ -n "$missing" ]; then
    record device FAIL $((SECONDS - start)) "libraries not found:$(tr '\n' ';' <<<"$missing")"
    return 3
  fi
  # Every carried library resolves to the carried copy.
  local lib wrong="" resolved
  resolved=$(ldd "$stage_dir/lib/libencore.so")
  for lib in "${CARRIED_LIBS[@]}"; do
    [ -e "$stage_dir/lib/$lib" ] || continue
    grep -qF "$lib => $stage_dir/lib/" <<<"$resolved" || wrong="$wrong $lib"
  done
  [ -z "$wrong" ] || { record device FAIL $((SECONDS - start)) "not the carried copy:$wrong"; return 3; }
  config=$(timeout 60 "$stage_dir/bin/encore_show_config" 2>&1)
  echo "$config" >>"$OUT/env.txt"
  local gpu
  gpu=$(grep -E "^\s+cuda:0 " <<<"$config" | head -1 | sed 's/^ *//')
  if [ -z "$gpu" ]; then
    record device FAIL $((SECONDS - start)) "stopped: no CUDA device ($(grep -E "^\s+cuda:" <<<"$config" | head -1 | sed 's/^ *cuda: *//'))"
    return 3
  fi
  if ! grep -q "(sm_90," <<<"$gpu"; then
    record device FAIL $((SECONDS - start)) "stopped: $gpu is not sm_90, which the pack is built for"
    return 3
  fi
  record device ok $((SECONDS - start)) "$gpu"
}

stage_first() {
  local start=$SECONDS rc
  bounded 90 "$stage_dir/bin/encore_tests" --gtest_filter='CudaCaptureFirstUse.*' \
    --gtest_output="xml:$work/first.xml" >>"$OUT/tests.log" 2>&1
  rc=$?
  junit_verdict first "$start" "$rc" "$work/first.xml"
}

stage_python() {
  local start=$SECONDS rc module
  module=$(ls "$stage_dir"/python/encore/_C.*.so 2>/dev/null | head -1)
  [ -n "$module" ] || { record python FAIL 0 "the pack has no Python module (no Python 3.12 where it was packed)"; return 1; }
  # The package: the working tree's Python sources with the carried module and stubs.
  cp "$root"/bindings/python/encore/*.py "$root"/bindings/python/encore/py.typed "$stage_dir/python/encore/" 2>/dev/null
  PYTHONPATH=$stage_dir/python PYTHONUNBUFFERED=1 bounded 150 python3 -m pytest "$root/tests/python/test_gpu.py" \
    -q -rs -p no:cacheprovider --junitxml="$work/python.xml" >"$OUT/python.log" 2>&1
  rc=$?
  junit_verdict python "$start" "$rc" "$work/python.xml"
}

stage_cuda() {
  local start=$SECONDS rc1 rc2
  bounded 240 "$stage_dir/bin/encore_tests" --gtest_filter='*Cuda*:*cuda*:Autotune.*:GraphLaunches.*' \
    --gtest_output="xml:$work/cuda.xml" >>"$OUT/tests.log" 2>&1
  rc1=$?
  bounded 60 "$stage_dir/bin/encore_cuda_tests" --gtest_output="xml:$work/cuda-runtime.xml" >>"$OUT/tests.log" 2>&1
  rc2=$?
  junit_verdict cuda "$start" $((rc1 ? rc1 : rc2)) "$work/cuda.xml" "$work/cuda-runtime.xml"
}

stage_nccl() {
  local start=$SECONDS rc plugin=$stage_dir/plugins/libencore_nccl.so missing
  [ -f "$plugin" ] || { record nccl FAIL 0 "the pack has no libencore_nccl.so (built without NCCL or MPI)"; return 1; }
  missing=$(ldd "$plugin" 2>&1 | grep "not found" | tr -s ' \t' ' ' | tr '\n' ';')
  [ -z "$missing" ] || { record nccl FAIL 0 "libraries not found:$missing"; return 1; }
  ENCORE_DIST=nccl ENCORE_NCCL_PLUGIN=$plugin bounded 120 "$stage_dir/bin/encore_dist_tests" \
    --gtest_filter='Nccl.*' --gtest_output="xml:$work/nccl.xml" >"$OUT/nccl.log" 2>&1
  rc=$?
  junit_verdict nccl "$start" "$rc" "$work/nccl.xml"
}

stage_train() {
  local start=$SECONDS rc=0 detail="" out
  for cmd in "train_small --device cuda --epochs 8" "train_lstm --device cuda --steps 1200"; do
    out=$(bounded 90 "$stage_dir/bin/"$cmd 2>&1)
    local r=$?
    echo "\$ $cmd (exit $r)" >>"$OUT/tests.log"
    echo "$out" >>"$OUT/tests.log"
    ((r)) && rc=$r
    detail="$detail${cmd%% *}: exit $r, $(tail -1 <<<"$out" | cut -c1-60); "
  done
  record train "$( ((rc)) && echo FAIL || echo ok)" $((SECONDS - start)) "$detail"
  return $((rc != 0))
}

stage_sanitize() {
  local start=$SECONDS sanitizer detail="" rc=0 line
  sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer 2>/dev/null | head -1)
  [ -n "$sanitizer" ] || { record sanitize FAIL 0 "compute-sanitizer not found"; return 1; }
  : >"$OUT/sanitizer.log"
  # API errors are left out: several tests provoke them on purpose (a capture that fails), and
  # encore checks every status itself. A run cut short by the budget has no summary: a failure.
  # Bounded: a tool slows kernels 10-100 times, cuDNN's most.
  local -a runs=(
    "memcheck|CudaGraphCapture.*:CudaGraph/TracedReplay.*/cuda:CudaCapture.OneGraphLaunchPerReplayedStep:CudaCapture.FunctionThatWritesItsArgumentsReplays:CudaCapture.CudnnLstmTrainingStepIsCapturedAndBitwiseEager|encore_tests|90"
    "memcheck|*|encore_cuda_tests|30"
    "racecheck|CudaGraph/TracedReplay.TrainingStepIsBitwiseTheEagerStep/cuda:CudaCapture.OneGraphLaunchPerReplayedStep|encore_tests|45")
  for run in "${runs[@]}"; do
    IFS='|' read -r tool filter binary cap <<<"$run"
    local log=$work/sanitizer-$tool-$binary.log
    bounded "$cap" "$sanitizer" --tool "$tool" --report-api-errors no --error-exitcode 9 --print-limit 20 \
      "$stage_dir/bin/$binary" --gtest_filter="$filter" >"$log" 2>&1
    local r=$?
    { echo "### $tool $binary $filter (exit $r)"; head -c 2000000 "$log"; } >>"$OUT/sanitizer.log"
    line=$(python3 "$here/report.py" sanitizer "$log")
    local verdict=$?
    ((r == 124)) && line="out of time; $line"
    ((verdict || (r != 0 && r != 9))) && rc=1
    detail="$detail$tool/$binary: $(head -1 <<<"$line") [exit $r]; "
  done
  record sanitize "$( ((rc)) && echo FAIL || echo ok)" $((SECONDS - start)) "$detail"
  return $rc
}

stage_bench() {
  local start=$SECONDS rc=0 detail="" r
  : >"$OUT/bench.log"
  bench() {  # name cap command...
    local name=$1 cap=$2
    shift 2
    echo "\$ $*" >>"$OUT/bench.log"
    bounded "$cap" "$@" --json "$work/bench-$name.json" >>"$OUT/bench.log" 2>&1
    r=$?
    ((r)) && rc=1
    detail="$detail$name: exit $r; "
  }
  bench bench_overhead 90 "$stage_dir/bin/bench_overhead" --device cuda
  bench compare_modes 120 "$stage_dir/bin/compare_modes" --device cuda --steps 50
  PYTHONPATH=$stage_dir/python bench bench_gpu_peers 180 python3 "$root/examples/bench_gpu_peers.py"
  record bench "$( ((rc)) && echo FAIL || echo ok)" $((SECONDS - start)) "$detail"
  return $rc
}

# ---- main -----------------------------------------------------------------------------------

if [ "${1:-}" = pack ]; then
  pack "${2:-}"
  exit
fi
if [ "${1:-}" = --dry-run ]; then
  dry_run=true
  shift
  if [ -n "${1:-}" ]; then
    source_dir=$(readlink -f "$1")
    shift
  fi
fi
selected=("$@")
((${#selected[@]})) || selected=("${STAGES[@]}")
for s in "${selected[@]}"; do
  declare -F "stage_$s" >/dev/null || die "no stage '$s' (stages: ${STAGES[*]})"
done
$dry_run && selected=(env device)

mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
: >"$work/stages.tsv"
: >"$OUT/tests.log"
unpack
export LD_LIBRARY_PATH
LD_LIBRARY_PATH=$(library_path)
export ENCORE_EXPECT_CUDA=1 OMP_WAIT_POLICY=PASSIVE
say "encore GPU check: stages ${selected[*]}; budget ${budget}s; files in $OUT"
status=0
for s in "${selected[@]}"; do
  if (($(left 600) < 10)); then
    record "$s" FAIL 0 "not run: the budget of ${budget}s is spent"
    status=1
    continue
  fi
  "stage_$s"
  rc=$?
  if ((rc == 3)); then
    status=3
    break
  fi
  ((rc)) && status=1
done
python3 "$here/report.py" summary "$work" "$OUT" >/dev/null
echo
cat "$OUT/summary.txt"
if $dry_run && ((status == 0)); then
  echo "dry run: stopping here (a CUDA device is present: run the stages without --dry-run)"
fi
exit $status
