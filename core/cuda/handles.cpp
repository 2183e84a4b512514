// The per-device cuBLAS and cuDNN handles, created on first use: one pair bound to the compute
// stream, one bound to the capture stream (CaptureScope).
#include "core/cuda/check.h"
#include "core/cuda/device_state.h"
#include "core/cuda/runtime.h"

namespace encore::cuda {

namespace {

// NVIDIA's recommended cuBLAS workspace for Hopper; also enough for earlier architectures.
constexpr size_t kCublasWorkspace = size_t{32} << 20;

CublasHandle make_cublas(cudaStream_t stream, void* workspace) {
  cublasHandle_t raw = nullptr;
  ENCORE_CUDA_CHECK("cublas", cublasCreate(&raw));
  CublasHandle handle(raw);
  ENCORE_CUDA_CHECK("cublas", cublasSetStream(raw, stream));
  // cublasSetStream resets the workspace to cuBLAS's own pool, so the workspace is set after
  // it. With a workspace of our own, cuBLAS never allocates, which a CUDA Graph capture would
  // otherwise record.
  ENCORE_CUDA_CHECK("cublas", cublasSetWorkspace(raw, workspace, kCublasWorkspace));
  ENCORE_CUDA_CHECK("cublas", cublasSetPointerMode(raw, CUBLAS_POINTER_MODE_HOST));
  return handle;
}

CudnnHandle make_cudnn(cudaStream_t stream) {
  cudnnHandle_t raw = nullptr;
  ENCORE_CUDA_CHECK("cudnn", cudnnCreate(&raw));
  CudnnHandle handle(raw);
  ENCORE_CUDA_CHECK("cudnn", cudnnSetStream(raw, stream));
  return handle;
}

cublasHandle_t compute_cublas(DeviceState& s) {
  std::call_once(s.cublas_once, [&s] {
    DeviceGuard guard(s.index);
    void* workspace = nullptr;
    ENCORE_CUDA_CHECK("cublas", cudaMalloc(&workspace, kCublasWorkspace));
    try {
      s.cublas = make_cublas(s.stream.get(), workspace);
    } catch (...) {
      (void)cudaFree(workspace);
      throw;
    }
    s.cublas_workspace = workspace;
  });
  return s.cublas.get();
}

cudnnHandle_t compute_cudnn(DeviceState& s) {
  std::call_once(s.cudnn_once, [&s] {
    DeviceGuard guard(s.index);
    s.cudnn = make_cudnn(s.stream.get());
  });
  return s.cudnn.get();
}

}  // namespace

cublasHandle_t cublas(int device) {
  if (DeviceState* c = capturing_state(device)) return c->capture_cublas.get();
  return compute_cublas(device_state(device));
}

cudnnHandle_t cudnn(int device) {
  if (DeviceState* c = capturing_state(device)) return c->capture_cudnn.get();
  return compute_cudnn(device_state(device));
}

void create_capture_handles(DeviceState& s) {
  DeviceGuard guard(s.index);
  cudaStream_t raw = nullptr;
  ENCORE_CUDA_CHECK("capture", cudaStreamCreateWithFlags(&raw, cudaStreamNonBlocking));
  s.capture_stream = Stream(raw);
  // The capture handle shares the compute handle's workspace: everything that uses either
  // executes on the compute stream (eager GEMMs, and the graphs, which are launched there), one
  // after the other, never concurrently.
  compute_cublas(s);
  s.capture_cublas = make_cublas(raw, s.cublas_workspace);
  s.capture_cudnn = make_cudnn(raw);
}

}  // namespace encore::cuda
