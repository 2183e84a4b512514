// The CPU kernels of the conv1d ops (ops/defs/conv1d.cpp holds their rows, shape inference and
// backward formulas): float32 through oneDNN's convolutions (ops/cpu/onednn_conv.cpp), float64
// by the plain loops of ops/cpu/conv_loops.h (oneDNN has none).
#pragma once

#include <cstdint>
#include <utility>

#include "ops/activation.h"
#include "ops/op.h"

namespace encore::cpu {

enum class ConvKind : uint8_t { Forward, BackwardData, BackwardFilter };

/// One convolution as oneDNN sees it: x (n, length, channels), w (kernel, channels, filters).
struct ConvProblem {
  ConvKind kind;
  int64_t n, length, channels, filters, kernel, stride, dilation, pad_l, pad_r;
  bool bias = false;  // forward only: conv1d_fused's bias and activation (oneDNN post-op)
  Activation activation = Activation::Linear;
  int64_t x_block = 0, y_block = 0;  // ConvAttrs' blocks
  bool operator==(const ConvProblem&) const = default;
  int64_t out_length() const {
    return (length + pad_l + pad_r - dilation * (kernel - 1) - 1) / stride + 1;
  }
};

/// The CPU kernel (run, per-shape prepare, describe) of the conv1d op of `kind`: conv1d and
/// conv1d_fused (Forward, x w [b] -> y), conv1d_backward_data (gy w -> gx),
/// conv1d_backward_filter (x gy -> gw); their attributes are ConvAttrs.
Kernel conv1d_kernel(ConvKind kind);

/// The x and y blocks (ConvAttrs' x_block, y_block; 0: channels-last) that the oneDNN
/// implementation this problem's kind would run wants (p.x_block, p.y_block ignored), asked
/// once per problem. A BackendError when oneDNN cannot set the problem up.
std::pair<int64_t, int64_t> onednn_preferred_blocks(const ConvProblem& p);

}  // namespace encore::cpu
