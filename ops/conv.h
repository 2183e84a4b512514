// 1-D convolution, channels-last: its attributes, and the geometry and index formula shared by
// the CPU reference kernels (float64) and the CUDA direct kernels, so both compute the same
// sums the same way.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/host_device.h"
#include "ops/activation.h"

namespace encore {

struct ConvAttrs {
  int64_t stride, dilation, pad_l, pad_r;
  int64_t length;  // conv1d_backward_data: the input length to reconstruct
  int64_t kernel;  // conv1d_backward_filter: the kernel size
  Activation activation = Activation::Linear;  // conv1d_fused: applied after the bias
  // The CPU's 'blocked' layout (Conv1dLayout): x's and y's block when they are to_blocked
  // tensors (ops/layout.h), 0 for channels-last; the channels and filters, which a blocked
  // tensor's shape does not say exactly.
  int64_t x_block = 0, y_block = 0, channels = 0, filters = 0;
  std::string str() const {
    std::string s = detail::cat("stride=", stride, ", dilation=", dilation, ", padding=(", pad_l,
                                ", ", pad_r, ")");
    if (activation != Activation::Linear) s += detail::cat(", activation=", name(activation));
    if (x_block || y_block) s += detail::cat(", blocks=(", x_block, ", ", y_block, ")");
    return s;
  }
  bool operator==(const ConvAttrs&) const = default;
};

/// One convolution call: x (n, length, channels), w (kernel, channels, filters),
/// y (n, out_length, filters).
struct ConvGeometry {
  int64_t n, length, channels, filters, kernel, out_length, stride, dilation, pad_l;
  /// The input step that output step t reads through kernel tap k (may be outside the input:
  /// padding).
  ENCORE_HD int64_t input_step(int64_t t, int64_t k) const {
    return t * stride + k * dilation - pad_l;
  }
  /// The output step that reads input step i through tap k, or -1 when none does.
  ENCORE_HD int64_t output_step(int64_t i, int64_t k) const {
    const int64_t num = i + pad_l - k * dilation;  // = t * stride
    if (num < 0 || num % stride != 0 || num / stride >= out_length) return -1;
    return num / stride;
  }
};

/// The oneDNN implementation each convolution shape got on the CPU (the per-shape setup cost
/// of problem 1 in docs/ARCHITECTURE.md), e.g. "forward N=32 L=140 C=30 F=128 K=40 stride=4
/// dilation=1 pad=(18, 18)" -> "x64:gemm:jit".
struct ConvPrimitiveInfo {
  std::string key;
  std::string impl;
};
std::vector<ConvPrimitiveInfo> conv1d_primitives();
/// The activations' layout of the CPU's float32 convolutions. Native: `nwc`, ours, never
/// converted (the default: fastest on the benchmark models, docs/BENCHMARKS.md). Blocked: the
/// layout oneDNN prefers for the shape (e.g. nCw16c): conv1d and conv1d_fused emit
/// to_blocked -> the convolution on blocked operands -> from_blocked, visible graph nodes (the
/// ledger counts them: layout_reorders, layout_reorder_ns). Eager mode converts around every
/// convolution; a traced Plan keeps consecutive convolutions blocked (graph/passes.h).
/// Applies to calls from now on.
enum class Conv1dLayout : uint8_t { Native, Blocked };
void set_conv1d_layout(Conv1dLayout layout);
Conv1dLayout conv1d_layout();
/// "native" or "blocked"; throws ValueError otherwise.
Conv1dLayout parse_conv1d_layout(const std::string& s);

/// Forgets every prepared kernel state and oneDNN's own primitive cache (Plans keep theirs):
/// the next use of each shape pays its setup again.
void clear_conv1d_primitives();

}  // namespace encore
