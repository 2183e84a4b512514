#include "ops/build_info.h"

#include <cblas.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <zlib.h>

#include <sstream>
#include <thread>

#if ENCORE_CUDA
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#endif

namespace encore {

const char* version() { return ENCORE_VERSION; }

namespace {

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

#if ENCORE_CUDA
// CUDA encodes 12.4 as 12040; cuDNN 9 encodes 9.1.0 as 90100 (cuDNN 8: 8.9.7 as 8907).
std::string cuda_version_text(int v) {
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}
std::string cudnn_version_text(size_t v) {
  const size_t major_unit = v >= 90000 ? 10000 : 1000;
  return std::to_string(v / major_unit) + "." + std::to_string(v % major_unit / 100) + "." +
         std::to_string(v % 100);
}

void describe_cuda(std::ostringstream& out) {
  int runtime = 0, driver = 0, cublas[3] = {0, 0, 0};
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);  // 0 when no driver is installed
  cublasGetProperty(MAJOR_VERSION, &cublas[0]);
  cublasGetProperty(MINOR_VERSION, &cublas[1]);
  cublasGetProperty(PATCH_LEVEL, &cublas[2]);
  out << "  CUDA runtime " << cuda_version_text(runtime) << ", driver "
      << (driver ? cuda_version_text(driver) : std::string("none found")) << "\n"
      << "  cuBLAS " << cublas[0] << "." << cublas[1] << "." << cublas[2] << ", cuDNN "
      << cudnn_version_text(cudnnGetVersion()) << "\n";
}

void describe_cuda_devices(std::ostringstream& out) {
  out << "  cuda: built for CUDA architectures " << ENCORE_CUDA_ARCHITECTURES << ", ";
  int driver = 0, count = 0;
  cudaDriverGetVersion(&driver);
  if (driver == 0) {
    out << "no device (no CUDA driver found)\n";
    return;
  }
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();  // no device: not an error for a report
    out << "no device (" << cudaGetErrorString(status) << ")\n";
    return;
  }
  out << count << " device(s)\n";
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    out << "    cuda:" << i << " " << p.name << " (sm_" << p.major << p.minor << ", "
        << p.totalGlobalMem / (1 << 20) << " MiB)\n";
  }
}
#endif

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
      << "  zlib " << zlibVersion() << "\n";
#if ENCORE_CUDA
  describe_cuda(out);
#endif

  const int omp_threads = omp_get_max_threads();
  out << "threads:\n"
      << "  CPU cores: " << std::thread::hardware_concurrency() << "\n"
      << "  OpenMP max threads: " << omp_threads << "\n"
      << "  OpenBLAS threads: " << openblas_get_num_threads() << "\n"
      << "  oneDNN threads: ";
  if (dnnl->cpu_runtime == DNNL_RUNTIME_OMP)
    out << omp_threads << " (OpenMP)\n";
  else if (dnnl->cpu_runtime == DNNL_RUNTIME_SEQ)
    out << "1 (sequential)\n";
  else
    out << "set by its " << dnnl_runtime_name(dnnl->cpu_runtime) << " runtime\n";

  out << "backends:\n  cpu: yes\n";
#if ENCORE_CUDA
  describe_cuda_devices(out);
#else
  out << "  cuda: not built (this build has no CUDA backend)\n";
#endif
  return out.str();
}

}  // namespace encore
