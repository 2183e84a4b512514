// The draw loop of kernels that take one Philox value per element (uniform, dropout): a thread
// per Philox block of four values, value i = lane i % 4 of block offset + i / 4, the order the
// CPU kernels use, so both devices draw the same numbers from the same generator state.
#pragma once

#include <cstdint>

#include "ops/cuda/device/vector.cuh"
#include "ops/philox.h"

namespace encore::cuda {

/// Calls f(i, bits) for each value i < n this thread draws. `state` is the generator's
/// (seed, offset) in device memory, so a replayed graph reads the offset its last replay left.
template <class F>
__device__ __forceinline__ void for_each_philox_value(int64_t n, const int64_t* state, F f) {
  const uint64_t seed = static_cast<uint64_t>(state[0]), offset = static_cast<uint64_t>(state[1]);
  const int64_t blocks = static_cast<int64_t>(philox_blocks(static_cast<uint64_t>(n)));
  for (int64_t b = thread_index(); b < blocks; b += thread_count()) {
    const Philox4 r = philox(seed, offset + static_cast<uint64_t>(b));
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const int64_t i = b * 4 + l;
      if (i >= n) break;
      f(i, r.v[l]);
    }
  }
}

}  // namespace encore::cuda
