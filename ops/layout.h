// oneDNN's blocked activation layout nCw{b}c as a plain tensor (N, ceil(C/b), L, b), and the
// index map between it and our channels-last (N, L, C), shared by the CPU and CUDA kernels of
// to_blocked / from_blocked (ops/defs/layout.cpp). Channels past C in the last block are zero.
#pragma once

#include <cstdint>
#include <string>

#include "core/error.h"
#include "core/host_device.h"

namespace encore {

struct BlockAttrs {
  int64_t block, channels;
  std::string str() const { return detail::cat("block=", block, ", channels=", channels); }
  bool operator==(const BlockAttrs&) const = default;
};

struct BlockedGeometry {
  int64_t n, length, channels, block;
  int64_t sn, sl, sc;  // the channels-last side's strides (to_blocked reads a strided view)
  ENCORE_HD int64_t blocks() const { return (channels + block - 1) / block; }
  ENCORE_HD int64_t blocked_numel() const { return n * blocks() * length * block; }
  /// The channels-last index of blocked entry e, or -1 for the zero tail of the last block.
  ENCORE_HD int64_t nwc_index(int64_t e) const {
    const int64_t j = e % block, l = e / block % length, cb = e / block / length % blocks(),
                  b = e / block / length / blocks();
    const int64_t c = cb * block + j;
    return c < channels ? b * sn + l * sl + c * sc : -1;
  }
};

}  // namespace encore
