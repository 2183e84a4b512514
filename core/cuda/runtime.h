// The CUDA runtime layer: devices, the one compute stream per device, the stream-ordered
// pool allocator, graph capture scopes, and kernel timing with events. Only compiled with the
// CUDA backend.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <mutex>

#include "core/allocator.h"
#include "core/tensor.h"

namespace encore::cuda {

/// Devices present (0 when there is no driver or no GPU; never throws).
int device_count();
/// Throws DeviceError naming the device when it is not present.
void require_device(int device);
/// The allocator for `device`: stream-ordered allocations on the compute stream from a memory
/// pool of encore's own (other libraries' pools are left alone), whose release threshold
/// keeps freed memory cached.
Allocator& allocator(int device);
/// The stream the calling thread queues work for `device` on: the device's compute stream,
/// where every kernel, copy and graph launch of encore runs, or, inside a CaptureScope, the
/// device's capture stream.
cudaStream_t stream(int device);
/// Waits for the pending frees of every device in use and hands its pool's unused memory back
/// to the driver (release_cached_memory in core/allocator.h).
void release_cached_memory();
void synchronize(int device);
/// Backend::wait_for_stream and Backend::drain (core/backend.h): never throw; a CUDA error
/// they meet is cleared (the next check reports a sticky one).
void wait_for_stream(int device, uintptr_t stream) noexcept;
void drain(int device) noexcept;

struct DeviceState;

/// While alive, the calling thread queues the work it does for `device` on the device's capture
/// stream: stream(), cublas() and cudnn() give this thread the capture stream and the cuBLAS /
/// cuDNN handles bound to it, while other threads keep queuing on the compute stream, so their
/// work can never land in a graph. One scope per device at a time (a second thread waits);
/// inside one, allocating device memory or queuing work for another device throws
/// UnsupportedError naming the op set with set_op.
///  - Mode::Capture: the caller begins and ends a CUDA Graph capture on stream(); nothing
///    executes there.
///  - Mode::WarmUp: the work executes, ordered after the work queued on the compute stream so
///    far and before what is queued there after the scope (events join the two streams both
///    ways). Prepare functions run their warm-ups in one, so that what cuDNN and cuBLAS set up
///    on a handle's first use of a kernel happens on the handles the capture uses, outside it.
///    Scratch memory is allocated before the scope and freed after it.
class CaptureScope {
 public:
  enum class Mode { Capture, WarmUp };
  explicit CaptureScope(int device, Mode mode = Mode::Capture);
  ~CaptureScope();
  CaptureScope(const CaptureScope&) = delete;
  CaptureScope& operator=(const CaptureScope&) = delete;

  cudaStream_t stream() const;
  int device() const;
  Mode mode() const { return mode_; }
  /// The op whose kernel is being captured, for error messages.
  void set_op(const char* op) { op_ = op; }
  const char* op() const { return op_; }

 private:
  DeviceState& state_;
  Mode mode_;
  std::unique_lock<std::mutex> lock_;
  const char* op_ = "capture";
};

/// Runs `launch` (which queues work on the compute stream) between two events, waits, and
/// adds the elapsed time to the ledger's kernel time (and a Chrome-trace event named `name`).
/// Used while profiling is on.
void time_on_stream(int device, const char* name, const std::function<void()>& launch);

}  // namespace encore::cuda
