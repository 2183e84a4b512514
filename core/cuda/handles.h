// What the CUDA kernels need from the runtime beyond core/cuda/runtime.h: RAII handles, the
// per-thread cuBLAS / cuDNN handles (bound to the compute stream), device buffers for
// workspaces, host<->device copies, and the per-device word through which kernels report bad
// indices without a host round trip.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstddef>
#include <string>
#include <utility>

namespace encore::cuda {

/// Makes `device` current for a scope and restores the previous device afterwards.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

/// An owned library handle, released with `Destroy`. Errors while releasing are ignored: a
/// destructor must not throw, and at process exit the driver may already be gone.
template <class H, auto Destroy> class Handle {
 public:
  Handle() = default;
  explicit Handle(H h) : h_(h) {}
  ~Handle() { reset(); }
  Handle(Handle&& o) noexcept : h_(std::exchange(o.h_, H{})) {}
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, H{});
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  H get() const { return h_; }
  explicit operator bool() const { return h_ != H{}; }
  void reset() {
    if (h_) (void)Destroy(h_);
    h_ = H{};
  }

 private:
  H h_{};
};

using Stream = Handle<cudaStream_t, cudaStreamDestroy>;
using Event = Handle<cudaEvent_t, cudaEventDestroy>;
using CublasHandle = Handle<cublasHandle_t, cublasDestroy_v2>;
using CudnnHandle = Handle<cudnnHandle_t, cudnnDestroy>;

/// A new event (cudaEventDisableTiming unless `timing`).
Event make_event(bool timing = false);

/// Device memory from the device's stream-ordered pool, handed back (ordered after the work
/// already queued on the compute stream) when destroyed. Prepared states own their
/// workspaces this way, so that a kernel called with its prepared state never allocates.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(size_t nbytes, int device);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)),
        size_(std::exchange(o.size_, 0)),
        device_(o.device_) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  size_t size() const { return size_; }
  template <class T> T* as() const { return static_cast<T*>(data_); }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
  int device_ = 0;
};

/// The calling thread's cuBLAS handle for `device`, bound to stream(device): the thread's own,
/// bound to the compute stream, or inside a CaptureScope the device's capture handle. Its
/// workspace is encore's own (cublasSetWorkspace), so that cuBLAS never allocates inside a
/// graph capture.
cublasHandle_t cublas(int device);
/// The calling thread's cuDNN handle for `device`, bound to stream(device), as cublas(): cuDNN
/// allows a handle on one thread at a time.
cudnnHandle_t cudnn(int device);

int multiprocessor_count(int device);
/// The GPU model, e.g. "NVIDIA H100 80GB HBM3 sm_90" (autotune keys: choices carry over
/// between GPUs of the same model, not between models).
const std::string& device_model(int device);
/// True while the calling thread captures work into a CUDA Graph (see CaptureScope).
bool capturing();
/// Device memory still free on `device` (0 when the driver cannot say).
size_t free_memory(int device);

/// Host to device on the compute stream. Returns without waiting for the copy; small copies
/// go through pinned staging buffers so that the host does not wait for queued kernels.
void copy_to_device(void* dst, const void* src, size_t nbytes, int device);
/// Device to host on the compute stream; returns when the data has arrived (the CPU may read
/// it next), and reports kernel-detected errors (see error_flag).
void copy_to_host(void* dst, const void* src, size_t nbytes, int device);

/// A device-visible word that kernels set (atomicCAS from 0) to error_code(op) when they meet
/// an input they cannot honour, e.g. an out-of-range index: such kernels skip the bad element
/// instead of touching memory out of bounds. The host raises the error as a ValueError naming
/// the op at the next synchronization point (synchronize, copy_to_host).
int* error_flag(int device);
/// The code a kernel of `op` writes into error_flag (stable for the process).
int error_code(const char* op);
/// Throws (and clears) an error reported through error_flag. Call after synchronizing.
void raise_kernel_errors(int device);

}  // namespace encore::cuda
