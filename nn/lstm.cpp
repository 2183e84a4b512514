#include "nn/lstm.h"

#include "nn/init.h"
#include "ops/dispatch.h"
#include "ops/nn.h"
#include "ops/ops.h"

namespace encore::nn {

LSTM::LSTM(int64_t units, LSTMOptions options)
    : units_(units), options_(std::move(options)),
      activation_(parse_activation(options_.activation)),
      recurrent_activation_(parse_activation(options_.recurrent_activation)) {
  ENCORE_CHECK(units >= 1, ValueError, "[lstm] units must be >= 1, got ", units);
}

Shape LSTM::build_impl(const Shape& s) {
  ENCORE_CHECK(s.size() == 3, ShapeError, "[lstm] expects input (batch, steps, features), got ", s.str());
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

bool LSTM::uses_cudnn(const Tensor& x) const {
  // cuDNN has no empty problems: an empty batch takes the composed path.
  const bool supported = x.device().is_cuda() && activation_ == Activation::Tanh &&
                         recurrent_activation_ == Activation::Sigmoid &&
                         x.dtype() == DType::Float32 && x.numel() > 0;
  switch (options_.implementation) {
    case LSTMImplementation::Composed: return false;
    case LSTMImplementation::Cudnn:
      ENCORE_CHECK(supported, UnsupportedError, "[", label(),
                   "] the cuDNN implementation needs non-empty float32 input on a CUDA device and "
                   "activation='tanh', recurrent_activation='sigmoid'");
      return true;
    case LSTMImplementation::Auto: break;
  }
  return supported;
}

Tensor LSTM::forward_impl(const Tensor& x) {
  ENCORE_CHECK(x.dim() == 3 && x.shape()[2] == kernel_.shape()[0] && x.shape()[1] >= 1, ShapeError,
               "[", label(), "] input ", x.shape().str(), " must be (batch, steps >= 1, ",
               kernel_.shape()[0], ")");
  return uses_cudnn(x) ? forward_cudnn(x) : forward_composed(x);
}

Tensor LSTM::forward_composed(const Tensor& x) {
  const int64_t batch = x.shape()[0], steps = x.shape()[1];
  // All input projections in one GEMM: (batch * steps, features) @ (features, 4 units).
  const Tensor xw = matmul(x, kernel_) + bias_;
  Tensor h;
  Tensor c = zeros({batch, units_}, x.dtype(), x.device());
  std::vector<Tensor> outputs(options_.return_sequences ? steps : 0);
  for (int64_t s = 0; s < steps; ++s) {
    const int64_t t = options_.reverse ? steps - 1 - s : s;
    Tensor z = xw.slice(1, t, t + 1).squeeze(1);
    if (h.defined()) z = z + matmul(h, recurrent_kernel_);
    std::tie(h, c) = lstm_cell(z, c, activation_, recurrent_activation_);
    if (options_.return_sequences) outputs[t] = h;
  }
  return options_.return_sequences ? stack(outputs, 1) : h;
}

Tensor LSTM::forward_cudnn(const Tensor& x) {
  const int64_t batch = x.shape()[0];
  const Tensor h0 = zeros({batch, units_}, x.dtype(), x.device());
  const Tensor c0 = zeros({batch, units_}, x.dtype(), x.device());
  const Tensor in[] = {options_.reverse ? flip(x, 1) : x, h0, c0, kernel_, recurrent_kernel_, bias_};
  const OutList out = dispatch(op("cudnn_lstm"), in, LstmAttrs{activation_, recurrent_activation_});
  if (!options_.return_sequences) return out[1];
  return options_.reverse ? flip(out[0], 1) : out[0];
}

Bidirectional::Bidirectional(std::shared_ptr<LSTM> layer, std::string merge_mode)
    : forward_(std::move(layer)), merge_mode_(std::move(merge_mode)) {
  ENCORE_CHECK(forward_, ValueError, "[bidirectional] needs a layer");
  ENCORE_CHECK(merge_mode_ == "concat" || merge_mode_ == "sum" || merge_mode_ == "mul" ||
                   merge_mode_ == "ave",
               ValueError, "[bidirectional] unknown merge_mode '", merge_mode_,
               "' (expected concat, sum, mul or ave)");
  LSTMOptions reversed = forward_->options();
  reversed.reverse = !reversed.reverse;
  backward_ = std::make_shared<LSTM>(forward_->units(), reversed);
  add_child("forward_lstm", forward_);
  add_child("backward_lstm", backward_);
}

Shape Bidirectional::build_impl(const Shape& s) {
  Shape out = forward_->build(s);
  backward_->build(s);
  if (merge_mode_ == "concat") out[out.size() - 1] *= 2;
  return out;
}

Tensor Bidirectional::forward_impl(const Tensor& x) {
  const Tensor f = forward_->forward(x), b = backward_->forward(x);
  if (merge_mode_ == "concat") return concat({f, b}, -1);
  if (merge_mode_ == "sum") return f + b;
  if (merge_mode_ == "mul") return f * b;
  return (f + b) * 0.5;
}

}  // namespace encore::nn
