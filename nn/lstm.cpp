#include "nn/lstm.h"

#include "nn/init.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace encore::nn {

LSTM::LSTM(int64_t units, LSTMOptions options)
    : units_(units),
      options_(std::move(options)),
      activation_(parse_activation(options_.activation)),
      recurrent_activation_(parse_activation(options_.recurrent_activation)) {
  ENCORE_CHECK(units >= 1, ValueError, "[lstm] units must be >= 1, got ", units);
  require_elementwise(activation_, "lstm");
  require_elementwise(recurrent_activation_, "lstm");
}

Shape LSTM::build_impl(const Shape& s) {
  ENCORE_CHECK(s.size() == 3, ShapeError, "[lstm] expects input (batch, steps, features), got ",
               s.str());
  const int64_t in = s[2], u = units_;
  checked_numel({4, u, std::max(in, u)}, "lstm");  // kernel (in, 4u) and recurrent kernel (u, 4u)
  kernel_ = add_parameter("kernel", init::glorot_uniform({in, 4 * u}, in, 4 * u));
  recurrent_kernel_ = add_parameter("recurrent_kernel", init::orthogonal(u, 4 * u));
  std::vector<float> b(4 * u, 0.0f);
  if (options_.unit_forget_bias)
    for (int64_t i = u; i < 2 * u; ++i) b[i] = 1.0f;
  bias_ = add_parameter("bias", from_vector(b, {4 * u}));
  return options_.return_sequences ? Shape{s[0], s[1], u} : Shape{s[0], u};
}

const OpDef* LSTM::fused_op(const Tensor& x) const {
  // Neither library has empty problems: an empty batch takes the composed path, as does a
  // bucketed call (the valid lengths are a tensor there).
  const bool supported = !graph::lengths_of(x) && activation_ == Activation::Tanh &&
                         recurrent_activation_ == Activation::Sigmoid &&
                         x.dtype() == DType::Float32 && x.numel() > 0;
  const OpDef* fused = fused_recurrence_op(RecurrentCell::Lstm, x.device().type);
  switch (options_.implementation) {
    case LSTMImplementation::Composed:
      return nullptr;
    case LSTMImplementation::Cudnn:
      ENCORE_CHECK(supported && x.device().is_cuda() && fused, UnsupportedError, "[", label(),
                   "] the cuDNN implementation needs non-empty float32 input on a CUDA device and "
                   "activation='tanh', recurrent_activation='sigmoid'");
      return fused;
    case LSTMImplementation::Auto:
      break;
  }
  return supported ? fused : nullptr;
}

bool LSTM::uses_cudnn(const Tensor& x) const {
  const OpDef* fused = fused_op(x);
  return fused && fused->runs_on(DeviceType::CUDA);
}
bool LSTM::uses_onednn(const Tensor& x) const {
  const OpDef* fused = fused_op(x);
  return fused && fused->runs_on(DeviceType::CPU);
}

Tensor LSTM::forward_impl(const Tensor& x) {
  ENCORE_CHECK(x.dim() == 3 && x.shape()[2] == kernel_.shape()[0] && x.shape()[1] >= 1, ShapeError,
               "[", label(), "] input ", x.shape().str(), " must be (batch, steps >= 1, ",
               kernel_.shape()[0], ")");
  const OpDef* fused = fused_op(x);
  return fused ? forward_fused(x, *fused) : forward_composed(x);
}

Tensor LSTM::forward_composed(const Tensor& x) {
  // All input projections in one GEMM: (batch * steps, features) @ (features, 4 units); then
  // the recurrence in one op.
  if (const auto l = graph::lengths_of(x); l && l->axis == 1) return forward_valid(x, l->length);
  const Tensor y = lstm_sequence(matmul(x, kernel_) + bias_, recurrent_kernel_, activation_,
                                 recurrent_activation_, options_.reverse);
  if (options_.return_sequences) return y;
  const int64_t last = options_.reverse ? 0 : x.shape()[1] - 1;
  return y.slice(1, last, last + 1).squeeze(1);
}

// A bucketed call: the recurrence runs over the valid steps of each row only, so the state
// never sees the padding; a reversed layer starts at the true end (the valid prefix reversed,
// run forwards, reversed back). Outputs at padded steps are zero.
Tensor LSTM::forward_valid(const Tensor& x, const Tensor& length) {
  Tensor xw = matmul(x, kernel_) + bias_;
  if (options_.reverse) xw = reverse_sequence(xw, length);
  Tensor y = lstm_sequence(xw, recurrent_kernel_, activation_, recurrent_activation_, false);
  if (!options_.return_sequences)  // the state after the last valid step
    return reverse_sequence(y, length).slice(1, 0, 1).squeeze(1);
  y = mask_sequence(y, length);
  return options_.reverse ? reverse_sequence(y, length) : y;
}

Tensor LSTM::forward_fused(const Tensor& x, const OpDef& fused) {
  const auto [y, h] =
      fused_recurrence(fused, options_.reverse ? flip(x, 1) : x, kernel_, recurrent_kernel_, bias_,
                       activation_, recurrent_activation_);
  if (!options_.return_sequences) return h;
  return options_.reverse ? flip(y, 1) : y;
}

std::shared_ptr<Recurrent> LSTM::reversed() const {
  LSTMOptions o = options_;
  o.reverse = !o.reverse;
  return std::make_shared<LSTM>(units_, o);
}

}  // namespace encore::nn

namespace encore::nn {
namespace {

const LayerDef& lstm_layer = define_layer({
    .name = "LSTM",
    .signature = "LSTM(units: int)",
    .options = &LSTMOptions::fields,
    .make = [](const CallArgs& a) -> LayerPtr {
      return std::make_shared<LSTM>(a.integer(0), options_of<LSTMOptions>(a));
    },
    .doc = "LSTM with Keras semantics (gates i, f, c, o) over (batch, steps, features).",
    .example = {.args = "units=3, return_sequences=True", .input = {{2, 5, 4}}},
});

}  // namespace
}  // namespace encore::nn
