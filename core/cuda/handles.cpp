// The cuBLAS and cuDNN handles: each thread's own, bound to the compute stream (ThreadHandles),
// and one pair per device bound to the capture stream (CaptureScope).
#include <array>

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

void* workspace(DeviceState& s) {
  std::call_once(s.workspace_once, [&s] {
    DeviceGuard guard(s.index);
    ENCORE_CUDA_CHECK("cublas", cudaMalloc(&s.cublas_workspace, kCublasWorkspace));
  });
  return s.cublas_workspace;
}

// The calling thread's handle sets by device; given back to their devices when the thread exits.
class ThreadSlots {
 public:
  ThreadSlots() = default;
  ThreadSlots(const ThreadSlots&) = delete;
  ThreadSlots& operator=(const ThreadSlots&) = delete;
  ~ThreadSlots() {
    for (const Slot& slot : slots_) {
      if (!slot.handles) continue;
      std::lock_guard lock(slot.state->handles_mutex);
      slot.state->idle_handles.push_back(slot.handles);
    }
  }
  ThreadHandles& get(DeviceState& s) {
    Slot& slot = slots_[s.index];
    if (slot.handles) [[likely]]
      return *slot.handles;
    std::lock_guard lock(s.handles_mutex);
    if (!s.idle_handles.empty()) {
      slot.handles = s.idle_handles.back();
      s.idle_handles.pop_back();
    } else {
      slot.handles = s.thread_handles.emplace_back(std::make_unique<ThreadHandles>()).get();
    }
    slot.state = &s;
    return *slot.handles;
  }

 private:
  struct Slot {
    DeviceState* state = nullptr;
    ThreadHandles* handles = nullptr;
  };
  std::array<Slot, 128> slots_{};  // by device index (Device::index is an int8_t)
};

thread_local ThreadSlots t_slots;

// A GEMM of each precision on the capture handle, joined to the compute stream: what cuBLAS sets
// up on a handle's first GEMMs happens now, not inside the first capture. (Kernels of other
// shapes load lazily inside a capture, which drivers from CUDA 12.3 on allow.)
void warm_up_capture_cublas(DeviceState& s) {
  DeviceBuffer operands(3 * sizeof(double), s.index);
  ENCORE_CUDA_CHECK("cublas", cudaMemsetAsync(operands.data(), 0, operands.size(), s.stream.get()));
  ENCORE_CUDA_CHECK("cublas", cudaEventRecord(s.capture_joins[0].get(), s.stream.get()));
  ENCORE_CUDA_CHECK("cublas",
                    cudaStreamWaitEvent(s.capture_stream.get(), s.capture_joins[0].get(), 0));
  const float fone = 1, fzero = 0;
  const double one = 1, zero = 0;
  const auto* f = operands.as<float>();
  const auto* d = operands.as<double>();
  const cublasHandle_t h = s.capture_cublas.get();
  ENCORE_CUDA_CHECK("cublas", cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &fone, f, 1, f + 1,
                                          1, &fzero, operands.as<float>() + 2, 1));
  ENCORE_CUDA_CHECK("cublas", cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, d, 1, d + 1,
                                          1, &zero, operands.as<double>() + 2, 1));
  ENCORE_CUDA_CHECK("cublas", cudaEventRecord(s.capture_joins[1].get(), s.capture_stream.get()));
  ENCORE_CUDA_CHECK("cublas", cudaStreamWaitEvent(s.stream.get(), s.capture_joins[1].get(), 0));
}

}  // namespace

cublasHandle_t cublas(int device) {
  if (DeviceState* c = capturing_state(device)) return c->capture_cublas.get();
  DeviceState& s = device_state(device);
  ThreadHandles& t = t_slots.get(s);
  if (!t.cublas) [[unlikely]] {
    DeviceGuard guard(device);
    t.cublas = make_cublas(s.stream.get(), workspace(s));
  }
  return t.cublas.get();
}

cudnnHandle_t cudnn(int device) {
  if (DeviceState* c = capturing_state(device)) return c->capture_cudnn.get();
  DeviceState& s = device_state(device);
  ThreadHandles& t = t_slots.get(s);
  if (!t.cudnn) [[unlikely]] {
    DeviceGuard guard(device);
    t.cudnn = make_cudnn(s.stream.get());
  }
  return t.cudnn.get();
}

void create_capture_handles(DeviceState& s) {
  DeviceGuard guard(s.index);
  cudaStream_t raw = nullptr;
  ENCORE_CUDA_CHECK("capture", cudaStreamCreateWithFlags(&raw, cudaStreamNonBlocking));
  s.capture_stream = Stream(raw);
  s.capture_joins[0] = make_event();
  s.capture_joins[1] = make_event();
  s.capture_cublas = make_cublas(raw, workspace(s));
  s.capture_cudnn = make_cudnn(raw);
  warm_up_capture_cublas(s);
}

}  // namespace encore::cuda
