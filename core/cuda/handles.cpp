// The per-device cuBLAS and cuDNN handles, created on first use and bound to the compute
// stream.
#include "core/cuda/check.h"
#include "core/cuda/device_state.h"

namespace encore::cuda {

namespace {
// NVIDIA's recommended cuBLAS workspace for Hopper; also enough for earlier architectures.
constexpr size_t kCublasWorkspace = size_t{32} << 20;
}  // namespace

cublasHandle_t cublas(int device) {
  DeviceState& s = device_state(device);
  std::call_once(s.cublas_once, [&s, device] {
    DeviceGuard guard(device);
    cublasHandle_t raw = nullptr;
    ENCORE_CUDA_CHECK("cublas", cublasCreate(&raw));
    CublasHandle handle(raw);
    ENCORE_CUDA_CHECK("cublas", cublasSetStream(raw, s.stream.get()));
    // cublasSetStream resets the workspace to cuBLAS's own pool, so the workspace is set after
    // it. With a workspace of our own, cuBLAS never allocates, which a CUDA Graph capture
    // would otherwise record.
    void* workspace = nullptr;
    ENCORE_CUDA_CHECK("cublas", cudaMalloc(&workspace, kCublasWorkspace));
    if (const cublasStatus_t st = cublasSetWorkspace(raw, workspace, kCublasWorkspace);
        st != CUBLAS_STATUS_SUCCESS) {
      (void)cudaFree(workspace);
      ENCORE_CUDA_CHECK("cublas", st);
    }
    ENCORE_CUDA_CHECK("cublas", cublasSetPointerMode(raw, CUBLAS_POINTER_MODE_HOST));
    s.cublas_workspace = workspace;
    s.cublas = std::move(handle);
  });
  return s.cublas.get();
}

cudnnHandle_t cudnn(int device) {
  DeviceState& s = device_state(device);
  std::call_once(s.cudnn_once, [&s, device] {
    DeviceGuard guard(device);
    cudnnHandle_t raw = nullptr;
    ENCORE_CUDA_CHECK("cudnn", cudnnCreate(&raw));
    CudnnHandle handle(raw);
    ENCORE_CUDA_CHECK("cudnn", cudnnSetStream(raw, s.stream.get()));
    s.cudnn = std::move(handle);
  });
  return s.cudnn.get();
}

}  // namespace encore::cuda
