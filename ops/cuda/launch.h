// Host-side helpers for launching kernels: grid sizes, the op's device and stream.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/cuda/check.h"
#include "core/cuda/handles.h"
#include "core/cuda/runtime.h"
#include "ops/registry.h"

namespace encore::cuda {

constexpr int kBlock = 256;

/// Blocks for `n` work items at `per_block` items per block. Kernels loop grid-stride, so the
/// grid is capped (2^20 blocks) and 32-bit index arithmetic inside them cannot overflow.
inline unsigned grid_for(int64_t n, int64_t per_block = kBlock) {
  const int64_t blocks = (n + per_block - 1) / per_block;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, int64_t{1} << 20));
}

/// Kernels index with 32-bit arithmetic when every index fits (with the grid-stride step).
inline bool small_index(int64_t n) { return n <= (int64_t{1} << 31); }

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

/// The device an op runs on: its first input's, or its first output's for creation ops.
inline int device_of(const KernelCtx& c) {
  return c.in.empty() ? c.out[0].device.index : c.in[0].device.index;
}

/// Makes the op's device current for a scope and gives its compute stream.
class OnDevice {
 public:
  explicit OnDevice(int device) : guard_(device), device_(device), stream_(cuda::stream(device)) {}
  explicit OnDevice(const KernelCtx& c) : OnDevice(device_of(c)) {}
  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }

 private:
  DeviceGuard guard_;
  int device_;
  cudaStream_t stream_;
};

}  // namespace encore::cuda
