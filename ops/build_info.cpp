#include "ops/build_info.h"

#include <cblas.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <thread>

#include "core/allocator.h"
#include "core/backend.h"
#include "core/threads.h"
#include "ops/cpu/gemm.h"
#include "ops/cpu/onednn.h"
#include "ops/prepared.h"

namespace encore {

const char* version() { return ENCORE_VERSION; }

namespace {

std::string mib(size_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", static_cast<double>(bytes) / (1 << 20));
  return b;
}

const char* dnnl_runtime_name(unsigned runtime) {
  switch (runtime) {
    case DNNL_RUNTIME_SEQ:
      return "sequential";
    case DNNL_RUNTIME_OMP:
      return "OpenMP";
    case DNNL_RUNTIME_TBB:
      return "TBB";
    case DNNL_RUNTIME_THREADPOOL:
      return "threadpool";
    default:
      return "unknown";
  }
}

const char* openblas_parallel_name(int parallel) {
  switch (parallel) {
    case 0:
      return "sequential";
    case 1:
      return "pthreads";
    case 2:
      return "OpenMP";
    default:
      return "unknown";
  }
}

}  // namespace

std::string show_config() {
  std::ostringstream out;
  out << "encore " << version() << " (" << ENCORE_BUILD_TYPE << " build, "
#if defined(__clang__)
      << "Clang " << __clang_version__
#elif defined(__GNUC__)
      << "GCC " << __VERSION__
#endif
      << ", C++" << __cplusplus / 100 % 100 << ")\n";

  const dnnl_version_t* dnnl = dnnl_version();
  const std::string dnnl_hash = dnnl->hash;  // "N/A" in distribution builds
  out << "libraries:\n"
      << "  oneDNN " << dnnl->major << "." << dnnl->minor << "." << dnnl->patch << " ("
      << (dnnl_hash == "N/A" ? "" : "git " + dnnl_hash + ", ") << "CPU runtime "
      << dnnl_runtime_name(dnnl->cpu_runtime) << ")\n"
      << "  BLAS: " << openblas_get_config() << " (core " << openblas_get_corename() << ", "
      << openblas_parallel_name(openblas_get_parallel()) << ")\n"
      << "  zlib " << zlibVersion() << "\n"
      << "kernels:\n"
      << cpu::describe_gemm();
  Backend* cuda = backend(DeviceType::CUDA);
  if (cuda) out << cuda->describe_libraries();

  sync_threads();
  const int omp_threads = omp_get_max_threads();
  const char* wait = std::getenv("OMP_WAIT_POLICY");
  out << "threads:\n"
      << "  CPU cores: " << std::thread::hardware_concurrency() << "\n"
      << "  encore threads: " << num_threads()
      << (threads_pinned_by_fork() ? " (pinned: forked after the parent's OpenMP workers started)\n"
                                   : " (set_num_threads, ENCORE_NUM_THREADS)\n")
      << "  OpenMP wait policy: " << (wait ? wait : "unset (OpenMP spins before sleeping)") << "\n"
      << "  OpenMP max threads: " << omp_threads << "\n"
      << "  OpenBLAS threads: " << openblas_get_num_threads() << "\n"
      << "  oneDNN threads: ";
  if (dnnl->cpu_runtime == DNNL_RUNTIME_OMP)
    out << omp_threads << " (OpenMP)\n";
  else if (dnnl->cpu_runtime == DNNL_RUNTIME_SEQ)
    out << "1 (sequential)\n";
  else
    out << "set by its " << dnnl_runtime_name(dnnl->cpu_runtime) << " runtime\n";

  cpu::configure_onednn_primitive_cache();
  const int onednn_cache = dnnl::get_primitive_cache_capacity();
  out << "caches:\n"
      << "  per-shape kernel states: " << prepared_size() << " entries, " << mib(prepared_bytes())
      << " MiB of " << mib(prepared_limit()) << " MiB (set_prepared_limit)\n"
      << "  oneDNN primitive cache: "
      << (onednn_cache
              ? std::to_string(onednn_cache) + " primitives (ONEDNN_PRIMITIVE_CACHE_CAPACITY)"
              : std::string("off (encore's per-shape states hold every primitive)"))
      << "\n  host allocator: " << mib(cpu_cached_bytes()) << " MiB of freed blocks kept\n";

  out << "backends:\n  cpu: yes\n";
  if (cuda)
    out << cuda->describe_devices();
  else
    out << "  cuda: not available (" << backend_status(DeviceType::CUDA) << ")\n";
  return out.str();
}

}  // namespace encore
