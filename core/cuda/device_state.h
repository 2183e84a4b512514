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
  void deallocate(void* ptr, Device device) override;
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

  std::mutex staging_mutex;
  std::deque<StagingBlock> staging;  // deque: blocks keep their address
  size_t staging_bytes = 0;
};

/// The state of `device`, created on first use (stream, pool configuration, error word).
/// Throws DeviceError when the device is not present.
DeviceState& device_state(int device);

}  // namespace encore::cuda
