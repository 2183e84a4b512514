// 16-byte vectors for contiguous elementwise kernels, and the grid-stride loop bounds.
#pragma once

#include <cstdint>

namespace encore::cuda {

template <class T> struct alignas(16) Vec {
  static constexpr int n = 16 / sizeof(T);
  T v[n];
};

__device__ __forceinline__ int64_t thread_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t thread_count() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

}  // namespace encore::cuda
