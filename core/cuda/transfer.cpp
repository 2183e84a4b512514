// Copies between host and device memory on the compute stream. Host-to-device copies of up to
// kStagingMaxCopy bytes go through pinned staging blocks: from pageable memory, the driver
// first waits for all work queued on the stream, which would stall an eager loop that uploads
// a batch while the previous step is still running.
#include <cstring>

#include "core/cuda/check.h"
#include "core/cuda/device_state.h"

namespace encore::cuda {

namespace {

constexpr size_t kStagingMaxCopy = size_t{8} << 20;
constexpr size_t kStagingBudget = size_t{64} << 20;  // pinned bytes per device before reusing
constexpr size_t kStagingMinBlock = size_t{1} << 20;

bool block_free(StagingBlock& b) {
  if (!b.used) return true;
  const cudaError_t q = cudaEventQuery(b.done.get());
  if (q == cudaSuccess) return true;
  (void)cudaGetLastError();  // cudaErrorNotReady also sets the last error
  if (q != cudaErrorNotReady) ENCORE_CUDA_CHECK("to_device", q);
  return false;
}

// A staging block of at least n bytes whose last copy has completed, or null when no pinned
// memory can be had (the caller then copies from pageable memory). Holds staging_mutex.
StagingBlock* acquire(DeviceState& s, size_t n) {
  StagingBlock* busy = nullptr;
  for (StagingBlock& b : s.staging) {
    if (b.size < n) continue;
    if (block_free(b)) return &b;
    if (!busy) busy = &b;
  }
  if (busy && s.staging_bytes + n > kStagingBudget) {
    ENCORE_CUDA_CHECK("to_device", cudaEventSynchronize(busy->done.get()));
    return busy;
  }
  const size_t size = std::max(kStagingMinBlock, (n + 65535) & ~size_t{65535});
  void* host = nullptr;
  if (cudaHostAlloc(&host, size, cudaHostAllocDefault) != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  StagingBlock& b = s.staging.emplace_back();
  b.host = host;
  b.size = size;
  b.done = make_event();
  s.staging_bytes += size;
  return &b;
}

}  // namespace

void copy_to_device(void* dst, const void* src, size_t nbytes, int device) {
  if (nbytes == 0) return;
  DeviceState& s = device_state(device);
  DeviceGuard guard(device);
  if (nbytes <= kStagingMaxCopy) {
    std::lock_guard<std::mutex> lock(s.staging_mutex);
    if (StagingBlock* b = acquire(s, nbytes)) {
      std::memcpy(b->host, src, nbytes);
      b->used = true;
      ENCORE_CUDA_CHECK("to_device", cudaMemcpyAsync(dst, b->host, nbytes, cudaMemcpyHostToDevice,
                                                     s.stream.get()));
      ENCORE_CUDA_CHECK("to_device", cudaEventRecord(b->done.get(), s.stream.get()));
      return;
    }
  }
  // From pageable memory the call returns once the source has been read, so the caller may
  // free it right after.
  ENCORE_CUDA_CHECK("to_device",
                    cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyHostToDevice, s.stream.get()));
}

void copy_to_host(void* dst, const void* src, size_t nbytes, int device) {
  DeviceState& s = device_state(device);
  DeviceGuard guard(device);
  // Straight into the (pageable) destination: the driver stages the transfer itself, and a
  // staging copy of ours would add a host memcpy without saving the wait.
  if (nbytes > 0)
    ENCORE_CUDA_CHECK("to_device",
                      cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToHost, s.stream.get()));
  ENCORE_CUDA_CHECK("to_device", cudaStreamSynchronize(s.stream.get()));
  raise_kernel_errors(device);
}

}  // namespace encore::cuda
