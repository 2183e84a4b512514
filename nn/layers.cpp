#include "nn/layers.h"

#include <limits>

#include "core/modes.h"
#include "nn/init.h"
#include "ops/ops.h"

namespace encore::nn {

namespace {
void require_rank(const char* layer, const Shape& s, int rank, const char* layout) {
  ENCORE_CHECK(s.size() == rank, ShapeError, "[", layer, "] expects input ", layout, ", got ", s.str());
}
}  // namespace

Dense::Dense(int64_t units, DenseOptions options)
    : units_(units), activation_(parse_activation(options.activation)), use_bias_(options.use_bias) {
  ENCORE_CHECK(units >= 1, ValueError, "[dense] units must be >= 1, got ", units);
}

Shape Dense::build_impl(const Shape& input_shape) {
  ENCORE_CHECK(input_shape.size() >= 1, ShapeError, "[dense] expects input (..., features), got ",
               input_shape.str());
  const int64_t in = input_shape.back();
  checked_numel({in, units_}, "dense");
  kernel_ = add_parameter("kernel", init::glorot_uniform({in, units_}, in, units_));
  if (use_bias_) bias_ = add_parameter("bias", zeros({units_}));
  Shape out = input_shape;
  out[out.size() - 1] = units_;
  return out;
}

Tensor Dense::forward_impl(const Tensor& x) {
  ENCORE_CHECK(x.dim() >= 1 && x.shape().back() == kernel_.shape()[0], ShapeError, "[", label(),
               "] input ", x.shape().str(), " has ", x.dim() ? x.shape().back() : 0,
               " features but the layer was built for ", kernel_.shape()[0]);
  // Bias and activation as the GEMM's epilogue (as in Conv1D: sigmoid follows as its own op,
  // whose result remembers its logits for binary_crossentropy).
  if (use_bias_ && activation_ == Activation::Sigmoid) return sigmoid(dense(x, kernel_, bias_, Activation::Linear));
  if (use_bias_ && fusable_activation(activation_)) return dense(x, kernel_, bias_, activation_);
  Tensor y = matmul(x, kernel_);
  if (use_bias_) y = y + bias_;
  return activation(y, activation_);
}

Conv1D::Conv1D(int64_t filters, int64_t kernel_size, Conv1DOptions options)
    : filters_(filters), kernel_size_(kernel_size), options_(std::move(options)),
      activation_(parse_activation(options_.activation)) {
  ENCORE_CHECK(filters >= 1 && kernel_size >= 1 && options_.strides >= 1 && options_.dilation_rate >= 1,
               ValueError, "[conv1d] filters, kernel_size, strides and dilation_rate must be >= 1, got ",
               filters, ", ", kernel_size, ", ", options_.strides, " and ", options_.dilation_rate);
  Padding::parse(options_.padding, "conv1d");
}

Shape Conv1D::build_impl(const Shape& s) {
  require_rank("conv1d", s, 3, "(batch, steps, channels)");
  const int64_t c = s[2];
  checked_numel({kernel_size_, c, filters_}, "conv1d");  // the kernel; fan-in and fan-out then fit
  kernel_ = add_parameter("kernel", init::glorot_uniform({kernel_size_, c, filters_}, kernel_size_ * c,
                                                         kernel_size_ * filters_));
  if (options_.use_bias) bias_ = add_parameter("bias", zeros({filters_}));
  const auto [pl, pr] = window_padding("conv1d", s[1], kernel_size_, options_.strides, options_.dilation_rate,
                                       Padding::parse(options_.padding, "conv1d"));
  const int64_t len = window_out_length("conv1d", s[1], kernel_size_, options_.strides, options_.dilation_rate, pl, pr);
  return {s[0], len, filters_};
}

Tensor Conv1D::forward_impl(const Tensor& input) {
  const auto [x, padding] = bucketed_input(input);  // as called, but in a bucketed trace
  // Bias and activation as the convolution's epilogue; sigmoid follows as its own op, whose
  // result remembers its logits for binary_crossentropy.
  if (options_.use_bias && fusable_activation(activation_)) {
    const bool sig = activation_ == Activation::Sigmoid;
    const Tensor y = conv1d_fused(x, kernel_, bias_, options_.strides, padding, options_.dilation_rate,
                                  sig ? Activation::Linear : activation_);
    return sig ? sigmoid(y) : y;
  }
  Tensor y = conv1d(x, kernel_, options_.strides, padding, options_.dilation_rate);
  if (options_.use_bias) y = y + bias_;
  return activation(y, activation_);
}

Dropout::Dropout(double rate) : rate_(rate) {
  ENCORE_CHECK(rate >= 0.0 && rate < 1.0, ValueError, "[dropout] rate must be in [0, 1), got ", rate);
}

Tensor Dropout::forward_impl(const Tensor& x) { return dropout(x, rate_, is_training()); }

Shape GlobalAveragePooling1D::build_impl(const Shape& s) {
  require_rank("global_average_pooling1d", s, 3, "(batch, steps, channels)");
  return {s[0], s[2]};
}
Tensor GlobalAveragePooling1D::forward_impl(const Tensor& x) {
  if (const auto l = graph::lengths_of(x); l && l->axis == 1)  // a bucketed call: the valid steps
    return sum(mask_sequence(x, l->length, 1), {1}) / l->length.to(x.dtype());
  return mean(x, {1});
}

Shape GlobalMaxPooling1D::build_impl(const Shape& s) {
  require_rank("global_max_pooling1d", s, 3, "(batch, steps, channels)");
  return {s[0], s[2]};
}
Tensor GlobalMaxPooling1D::forward_impl(const Tensor& x) {
  if (const auto l = graph::lengths_of(x); l && l->axis == 1)  // a bucketed call: the valid steps
    return max(mask_sequence(x, l->length, 1, -std::numeric_limits<double>::infinity()), {1});
  return max(x, {1});
}

Pooling1D::Pooling1D(const char* op, PoolFn pool, int64_t pool_size, Pooling1DOptions options)
    : op_(op), pool_(pool), pool_size_(pool_size), options_(std::move(options)) {
  ENCORE_CHECK(pool_size >= 1 && options_.strides.value_or(1) >= 1, ValueError, "[", op,
               "] pool_size and strides must be >= 1, got ", pool_size, " and ",
               options_.strides.value_or(pool_size));
  const Padding p = Padding::parse(options_.padding, op);
  ENCORE_CHECK(p.kind != Padding::Causal, ValueError, "[", op, "] padding must be 'valid' or 'same'");
}
Shape Pooling1D::build_impl(const Shape& s) {
  require_rank(op_, s, 3, "(batch, steps, channels)");
  const int64_t stride = options_.strides.value_or(pool_size_);
  const auto [l, r] = window_padding(op_, s[1], pool_size_, stride, 1, Padding::parse(options_.padding, op_));
  return {s[0], window_out_length(op_, s[1], pool_size_, stride, 1, l, r), s[2]};
}
Tensor Pooling1D::forward_impl(const Tensor& x) {
  return pool_(x, pool_size_, options_.strides, Padding::parse(options_.padding, op_));
}

MaxPooling1D::MaxPooling1D(int64_t pool_size, Pooling1DOptions options)
    : Pooling1D("max_pooling1d", &max_pool1d, pool_size, std::move(options)) {}

AveragePooling1D::AveragePooling1D(int64_t pool_size, Pooling1DOptions options)
    : Pooling1D("average_pooling1d", &avg_pool1d, pool_size, std::move(options)) {}

Embedding::Embedding(int64_t input_dim, int64_t output_dim) : input_dim_(input_dim), output_dim_(output_dim) {
  ENCORE_CHECK(input_dim >= 1 && output_dim >= 1, ValueError,
               "[embedding] input_dim and output_dim must be >= 1, got ", input_dim, " and ", output_dim);
}
Shape Embedding::build_impl(const Shape& s) {
  ENCORE_CHECK(s.size() < kMaxDims, ShapeError, "[embedding] indices ", s.str(), " have too many axes for one more");
  checked_numel({input_dim_, output_dim_}, "embedding");
  embeddings_ = add_parameter("embeddings", uniform({input_dim_, output_dim_}, -0.05, 0.05));
  Shape out = s;
  out.push_back(output_dim_);
  return out;
}
Tensor Embedding::forward_impl(const Tensor& x) { return embedding(embeddings_, x); }

ActivationLayer::ActivationLayer(const std::string& activation) : activation_(parse_activation(activation)) {}
Tensor ActivationLayer::forward_impl(const Tensor& x) { return encore::activation(x, activation_); }

Shape Flatten::build_impl(const Shape& s) {
  ENCORE_CHECK(s.size() >= 1, ShapeError, "[flatten] expects a batch axis, got ", s.str());
  Shape features = s;
  features.erase(0);
  return {s[0], checked_numel(features, "flatten")};
}
Tensor Flatten::forward_impl(const Tensor& x) { return x.flatten(1); }

}  // namespace encore::nn
