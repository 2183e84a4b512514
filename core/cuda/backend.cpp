// The CUDA backend as libencore sees it (core/backend.h): registered when libencore loads this
// plugin.
#include "core/backend.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <sstream>

#include "core/cuda/runtime.h"

namespace encore::cuda {

namespace {

// CUDA encodes 12.4 as 12040; cuDNN 9 encodes 9.1.0 as 90100 (cuDNN 8: 8.9.7 as 8907).
std::string cuda_version_text(int v) {
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}
std::string cudnn_version_text(size_t v) {
  const size_t major_unit = v >= 90000 ? 10000 : 1000;
  return std::to_string(v / major_unit) + "." + std::to_string(v % major_unit / 100) + "." +
         std::to_string(v % 100);
}

class CudaBackend final : public Backend {
 public:
  int device_count() override { return cuda::device_count(); }

  std::string no_device_reason() override {
    if (device_count() > 0) return {};
    int driver = 0, count = 0;
    cudaDriverGetVersion(&driver);  // 0 when no driver is installed
    if (driver == 0) return "no CUDA driver found";
    const cudaError_t status = cudaGetDeviceCount(&count);
    (void)cudaGetLastError();  // no device: not an error for a CPU run
    return std::string("no CUDA device (") +
           (status == cudaSuccess ? "the driver reports none" : cudaGetErrorString(status)) + ")";
  }

  Allocator& allocator(int device) override { return cuda::allocator(device); }
  void synchronize(int device) override { cuda::synchronize(device); }
  void* stream(int device) override { return cuda::stream(device); }
  void release_cached_memory() override { cuda::release_cached_memory(); }
  void wait_for_stream(int device, uintptr_t stream) noexcept override {
    cuda::wait_for_stream(device, stream);
  }
  void drain(int device) noexcept override { cuda::drain(device); }

  void time_kernel(int device, const char* name, const std::function<void()>& launch) override {
    time_on_stream(device, name, launch);
  }

  std::string describe_libraries() override {
    int runtime = 0, driver = 0, cublas[3] = {0, 0, 0};
    cudaRuntimeGetVersion(&runtime);
    cudaDriverGetVersion(&driver);
    cublasGetProperty(MAJOR_VERSION, &cublas[0]);
    cublasGetProperty(MINOR_VERSION, &cublas[1]);
    cublasGetProperty(PATCH_LEVEL, &cublas[2]);
    std::ostringstream out;
    out << "  CUDA runtime " << cuda_version_text(runtime) << ", driver "
        << (driver ? cuda_version_text(driver) : std::string("none found")) << "\n"
        << "  cuBLAS " << cublas[0] << "." << cublas[1] << "." << cublas[2] << ", cuDNN "
        << cudnn_version_text(cudnnGetVersion()) << "\n";
    return out.str();
  }

  std::string describe_devices() override {
    std::ostringstream out;
    out << "  cuda: built for CUDA architectures " << ENCORE_CUDA_ARCHITECTURES << ", ";
    const int count = device_count();
    if (count == 0) {
      out << no_device_reason() << "\n";
      return out.str();
    }
    out << count << " device(s)\n";
    for (int i = 0; i < count; ++i) {
      cudaDeviceProp p{};
      if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
      out << "    cuda:" << i << " " << p.name << " (sm_" << p.major << p.minor << ", "
          << p.totalGlobalMem / (1 << 20) << " MiB)\n";
    }
    return out.str();
  }

  // A library call that needs no GPU and no initialization: the autotune store may be loaded
  // before any op has run.
  size_t autotune_library_version() override { return cudnnGetVersion(); }
};

CudaBackend g_backend;
const bool kRegistered = register_backend(DeviceType::CUDA, g_backend);

}  // namespace

}  // namespace encore::cuda
