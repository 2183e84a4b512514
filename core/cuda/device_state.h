// Per-device runtime state shared by the files of core/cuda (not for use elsewhere).
#pragma once

#include <deque>
#include <memory>
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

/// One thread's cuBLAS and cuDNN handles for a device, bound to its compute stream. cuDNN allows
/// a handle on one thread at a time, and a cuBLAS handle's settings are shared by every thread
/// using it, while eager ops run on any thread (fit and Module.forward release the GIL): each
/// thread gets its own, made on its first use of each library, and hands them to the next
/// thread that needs some when it exits (they are never destroyed: cudnnDestroy synchronizes
/// the device, and at process exit the driver may already be gone).
struct ThreadHandles {
  CublasHandle cublas;
  CudnnHandle cudnn;
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

  // The one cuBLAS workspace every handle of the device uses: all their work executes on the
  // compute stream (eager GEMMs, warm-ups joined to it, and the graphs, launched there), one
  // after the other, never concurrently.
  std::once_flag workspace_once;
  void* cublas_workspace = nullptr;

  // The threads' handles (ThreadHandles): every set made, and those whose thread exited.
  std::mutex handles_mutex;
  std::vector<std::unique_ptr<ThreadHandles>> thread_handles;
  std::vector<ThreadHandles*> idle_handles;

  // Graph capture and warm-ups (CaptureScope): a stream only the capturing thread sees, handles
  // bound to it, the events that join it to the compute stream in a warm-up, and the lock that
  // lets one thread at a time use them.
  std::mutex capture_mutex;
  std::once_flag capture_once;
  Stream capture_stream;
  CublasHandle capture_cublas;
  CudnnHandle capture_cudnn;
  Event capture_joins[2];  // compute -> capture, capture -> compute

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
/// Creates the capture stream, the cuBLAS / cuDNN handles bound to it and the join events, and
/// warms the cuBLAS handle up (once per device; the caller holds capture_mutex).
void create_capture_handles(DeviceState& s);

}  // namespace encore::cuda
