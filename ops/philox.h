// Philox4x32-10, the counter-based generator (Salmon et al., SC'11), shared by the CPU and
// CUDA kernels so both backends draw the same bits from the same (seed, offset): dropout
// masks agree across devices and between eager runs and graph replays.
//
// Stream layout: an op that needs n values draws 32-bit value i from block (offset + i / 4),
// lane i % 4, and then advances the generator's offset by ceil(n / 4) blocks.
#pragma once

#include <cstdint>

#include "ops/functors.h"

namespace encore {

struct Philox4 {
  uint32_t v[4];
};

ENCORE_HD Philox4 philox(uint64_t seed, uint64_t block) {
  uint32_t c0 = static_cast<uint32_t>(block), c1 = static_cast<uint32_t>(block >> 32), c2 = 0,
           c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    const uint64_t p0 = uint64_t{0xD2511F53u} * c0, p1 = uint64_t{0xCD9E8D57u} * c2;
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {{c0, c1, c2, c3}};
}

/// 32-bit value `i` of the stream starting at block `offset`.
ENCORE_HD uint32_t philox_value(uint64_t seed, uint64_t offset, uint64_t i) {
  return philox(seed, offset + i / 4).v[i % 4];
}

/// Uniform in [0, 1) with 24 random bits (exact in float32).
ENCORE_HD float uniform01(uint32_t x) { return static_cast<float>(x >> 8) * (1.0f / 16777216.0f); }

/// Blocks an op drawing n values consumes.
ENCORE_HD uint64_t philox_blocks(uint64_t n) { return (n + 3) / 4; }

}  // namespace encore
