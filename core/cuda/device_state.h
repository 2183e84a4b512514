// Per-device runtime state shared by the files of core/cuda (not for use elsewhere).
#pragma once

#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/cuda/handles.h"

namespace encore::cuda {

/// A pinned host buffer for staging host-to-device copies; free again once `done` completed.
struct StagingBlock {
  void* host = nullptr;
  size_t size = 0;
  Event done;
  bool used = false;
};

class PoolAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes, Device device) override;
  void deallocate(void* ptr, size_t nbytes, Device device) override;
};

struct DeviceState {
  int index = 0;
  Stream stream;
  cudaMemPool_t pool = nullptr;
  PoolAllocator allocator;
  int* error_host = nullptr;    // mapped pinned word (see error_flag)
  int* error_device = nullptr;  // its device address
  int sm_count = 0;
  size_t total_memory = 0;
  std::string model;

  std::once_flag cublas_once;
  CublasHandle cublas;
  void* cublas_workspace = nullptr;

  std::once_flag cudnn_once;
  CudnnHandle cudnn;

  // Graph capture (CaptureScope): a stream only the capturing thread sees, handles bound to it,
  // and the lock that lets one thread capture at a time.
  std::mutex capture_mutex;
  std::once_flag capture_once;
  Stream capture_stream;
  CublasHandle capture_cublas;
  CudnnHandle capture_cudnn;

  std::mutex staging_mutex;
  std::deque<StagingBlock> staging;  // deque: blocks keep their address
  size_t staging_bytes = 0;
};

/// The state of `device`, created on first use (stream, memory pool, error word).
/// Throws DeviceError when the device is not present.
DeviceState& device_state(int device);
/// The state of the device the calling thread captures for, or null when it is not capturing;
/// throws UnsupportedError naming the op when it captures another device than `device`.
DeviceState* capturing_state(int device);
/// Creates the capture stream and the cuBLAS / cuDNN handles bound to it (once per device).
void create_capture_handles(DeviceState& s);

}  // namespace encore::cuda
