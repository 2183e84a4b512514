// Bucketing rules of the built-in layers (graph/lengths.h): how the valid length along the
// padded axis passes from a layer's input to its output. Per-step layers keep it, windows
// shrink it, layers that reduce the steps (global pooling, a recurrence returning its last
// state) end it; a layer that cannot be exact refuses, naming itself. The masking itself is
// in the layers' forward passes.
#include "nn/gru.h"
#include "nn/layers.h"
#include "nn/lstm.h"
#include "nn/normalization.h"
#include "nn/recurrent.h"
#include "ops/ops.h"

namespace encore::nn {

using graph::Lengths;
using MaybeLengths = std::optional<Lengths>;

namespace {

[[noreturn]] void refuse(const std::string& layer, const Lengths& in, const Tensor& x,
                         const std::string& why) {
  throw ValueError(detail::cat("[", layer, "] cannot be exact under a bucket policy: ", why,
                               " (input ", x.shape().str(), ", padded along axis ", in.axis,
                               "). Trace exactly (the default policy), or bucket another axis"));
}

// The steps axis of a (batch, steps, channels) layer: windows and reductions run along it.
constexpr int kSteps = 1;

}  // namespace

std::optional<Lengths> Module::output_lengths(const Lengths&, const Tensor&, const Tensor&) const {
  return std::nullopt;
}

MaybeLengths Dense::output_lengths(const Lengths& in, const Tensor& x, const Tensor& y) const {
  if (in.axis == x.dim() - 1) refuse(label(), in, x, "it mixes the features of the padded axis");
  return graph::same_lengths(in, x, y);
}

// 'same' windows read past the valid steps: those must read as zeros, as the eager call's
// implicit padding. With strides > 1 the windows also start where the true length L puts
// them: the left padding max((ceil(L / s) - 1) * s - L + span, 0) / 2 depends on L. The input
// is then shifted right by that padding (the valid prefix reversed, and reversed again over
// L + padding, which moves it behind zeros) and convolved 'valid': the same windows as eager.
std::pair<Tensor, Padding> Conv1D::bucketed_input(const Tensor& x) const {
  const Padding p = Padding::parse(options_.padding, "conv1d");
  const std::optional<Lengths> l = graph::lengths_of(x);
  if (p.kind != Padding::Same || !l || l->axis != kSteps) return {x, p};
  const Tensor masked = graph::mask_padding(x, kSteps);
  if (options_.strides == 1) return {masked, p};
  const int64_t s = options_.strides,
                span = window_span("conv1d", kernel_size_, options_.dilation_rate);
  const Tensor& n = l->length;
  const Tensor total =
      maximum(((n + (s - 1)) / s - 1) * s - n + span, zeros({}, DType::Int64, x.device()));
  const Tensor shifted =
      reverse_sequence(reverse_sequence(pad(masked, kSteps, 0, span - 1), n), n + total / 2);
  return {shifted, Padding::valid()};
}

MaybeLengths Conv1D::output_lengths(const Lengths& in, const Tensor& x, const Tensor& y) const {
  if (in.axis != kSteps) {
    if (in.axis == 2) refuse(label(), in, x, "it mixes the channels of the padded axis");
    return graph::same_lengths(in, x, y);
  }
  const Padding p = Padding::parse(options_.padding, "conv1d");
  const int64_t s = options_.strides, span = (kernel_size_ - 1) * options_.dilation_rate;
  if (p.kind == Padding::Valid)
    return graph::window_lengths(in, kernel_size_, s, options_.dilation_rate, 0);
  if (p.kind == Padding::Causal)
    return graph::window_lengths(in, kernel_size_, s, options_.dilation_rate, span);
  // 'same': ceil(length / strides) windows.
  return graph::window_lengths(in, 1, s, 1, 0);
}

MaybeLengths Pooling1D::output_lengths(const Lengths& in, const Tensor& x, const Tensor& y) const {
  if (in.axis != kSteps) return graph::same_lengths(in, x, y);
  if (Padding::parse(options_.padding, op_).kind != Padding::Valid)
    refuse(label(), in, x, "with 'same' padding its last window depends on the length");
  return graph::window_lengths(in, pool_size_, options_.strides.value_or(pool_size_), 1, 0);
}

// Global pooling ends the steps axis (the masking is in forward_impl); other axes pass.
MaybeLengths GlobalAveragePooling1D::output_lengths(const Lengths& in, const Tensor& x,
                                                    const Tensor& y) const {
  return in.axis == 0 ? graph::same_lengths(in, x, y) : std::nullopt;
}
MaybeLengths GlobalMaxPooling1D::output_lengths(const Lengths& in, const Tensor& x,
                                                const Tensor& y) const {
  return in.axis == 0 ? graph::same_lengths(in, x, y) : std::nullopt;
}

MaybeLengths Dropout::output_lengths(const Lengths& in, const Tensor& x, const Tensor& y) const {
  if (is_training() && rate_ > 0)
    graph::note_inexact(label() +
                        ": in training its mask is drawn over the padded shape, so the real "
                        "entries are dropped with the same probability but by other random numbers "
                        "than in the eager call (the parameters after a step differ from eager's)");
  return graph::same_lengths(in, x, y);
}
MaybeLengths ActivationLayer::output_lengths(const Lengths& in, const Tensor& x,
                                             const Tensor& y) const {
  if (activation_ == Activation::Softmax && in.axis == x.dim() - 1)
    refuse(label(), in, x, "softmax normalizes over the padded axis");
  return graph::same_lengths(in, x, y);
}
MaybeLengths Embedding::output_lengths(const Lengths& in, const Tensor& x, const Tensor& y) const {
  return graph::same_lengths(in, x, y);
}

MaybeLengths Flatten::output_lengths(const Lengths& in, const Tensor& x, const Tensor& y) const {
  if (in.axis != 0) refuse(label(), in, x, "it flattens the padded axis into the features");
  return graph::same_lengths(in, x, y);
}

MaybeLengths BatchNormalization::output_lengths(const Lengths& in, const Tensor& x,
                                                const Tensor& y) const {
  if (in.axis == normalize_axis(options_.axis, x.dim(), "batch_normalization"))
    refuse(label(), in, x, "the padded axis is its channels axis");
  return graph::same_lengths(in, x, y);  // batch statistics are taken over the valid entries
}
MaybeLengths LayerNormalization::output_lengths(const Lengths& in, const Tensor& x,
                                                const Tensor& y) const {
  if (in.axis == normalize_axis(options_.axis, x.dim(), "layer_normalization"))
    refuse(label(), in, x, "it normalizes over the padded axis");
  return graph::same_lengths(in, x, y);
}

// A recurrence returning its last state ends the steps axis; its sequences keep it.
MaybeLengths LSTM::output_lengths(const Lengths& in, const Tensor& x, const Tensor& y) const {
  return in.axis != kSteps || options_.return_sequences ? graph::same_lengths(in, x, y)
                                                        : std::nullopt;
}
MaybeLengths GRU::output_lengths(const Lengths& in, const Tensor& x, const Tensor& y) const {
  return in.axis != kSteps || options_.return_sequences ? graph::same_lengths(in, x, y)
                                                        : std::nullopt;
}
MaybeLengths Bidirectional::output_lengths(const Lengths& in, const Tensor& x,
                                           const Tensor& y) const {
  return forward_->output_lengths(in, x, y);
}

}  // namespace encore::nn
