#include "nn/layers.h"

#include <limits>

#include "core/modes.h"
#include "nn/init.h"
#include "ops/ops.h"

namespace encore::nn {

namespace {
void require_rank(const char* layer, const Shape& s, int rank, const char* layout) {
  ENCORE_CHECK(s.size() == rank, ShapeError, "[", layer, "] expects input ", layout, ", got ",
               s.str());
}
}  // namespace

Dense::Dense(int64_t units, DenseOptions options)
    : units_(units),
      activation_(parse_activation(options.activation)),
      use_bias_(options.use_bias) {
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
  if (use_bias_ && activation_ == Activation::Sigmoid)
    return sigmoid(dense(x, kernel_, bias_, Activation::Linear));
  if (use_bias_ && fusable_activation(activation_)) return dense(x, kernel_, bias_, activation_);
  Tensor y = matmul(x, kernel_);
  if (use_bias_) y = y + bias_;
  return activation(y, activation_);
}

Conv1D::Conv1D(int64_t filters, int64_t kernel_size, Conv1DOptions options)
    : filters_(filters),
      kernel_size_(kernel_size),
      options_(std::move(options)),
      activation_(parse_activation(options_.activation)) {
  ENCORE_CHECK(
      filters >= 1 && kernel_size >= 1 && options_.strides >= 1 && options_.dilation_rate >= 1,
      ValueError, "[conv1d] filters, kernel_size, strides and dilation_rate must be >= 1, got ",
      filters, ", ", kernel_size, ", ", options_.strides, " and ", options_.dilation_rate);
  Padding::parse(options_.padding, "conv1d");
}

Shape Conv1D::build_impl(const Shape& s) {
  require_rank("conv1d", s, 3, "(batch, steps, channels)");
  const int64_t c = s[2];
  checked_numel({kernel_size_, c, filters_}, "conv1d");  // the kernel; fan-in and fan-out then fit
  kernel_ = add_parameter(
      "kernel",
      init::glorot_uniform({kernel_size_, c, filters_}, kernel_size_ * c, kernel_size_ * filters_));
  if (options_.use_bias) bias_ = add_parameter("bias", zeros({filters_}));
  const auto [pl, pr] =
      window_padding("conv1d", s[1], kernel_size_, options_.strides, options_.dilation_rate,
                     Padding::parse(options_.padding, "conv1d"));
  const int64_t len = window_out_length("conv1d", s[1], kernel_size_, options_.strides,
                                        options_.dilation_rate, pl, pr);
  return {s[0], len, filters_};
}

Tensor Conv1D::forward_impl(const Tensor& input) {
  const auto [x, padding] = bucketed_input(input);  // as called, but in a bucketed trace
  // Bias and activation as the convolution's epilogue; sigmoid follows as its own op, whose
  // result remembers its logits for binary_crossentropy.
  if (options_.use_bias && fusable_activation(activation_)) {
    const bool sig = activation_ == Activation::Sigmoid;
    const Tensor y = conv1d_fused(x, kernel_, bias_, options_.strides, padding,
                                  options_.dilation_rate, sig ? Activation::Linear : activation_);
    return sig ? sigmoid(y) : y;
  }
  Tensor y = conv1d(x, kernel_, options_.strides, padding, options_.dilation_rate);
  if (options_.use_bias) y = y + bias_;
  return activation(y, activation_);
}

Dropout::Dropout(double rate) : rate_(rate) {
  ENCORE_CHECK(rate >= 0.0 && rate < 1.0, ValueError, "[dropout] rate must be in [0, 1), got ",
               rate);
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

Pooling1D::Pooling1D(const char* op, PoolFn pool, Pooling1DOptions options)
    : op_(op), pool_(pool), pool_size_(options.pool_size), options_(std::move(options)) {
  ENCORE_CHECK(pool_size_ >= 1 && options_.strides.value_or(1) >= 1, ValueError, "[", op,
               "] pool_size and strides must be >= 1, got ", pool_size_, " and ",
               options_.strides.value_or(pool_size_));
  const Padding p = Padding::parse(options_.padding, op);
  ENCORE_CHECK(p.kind != Padding::Causal, ValueError, "[", op,
               "] padding must be 'valid' or 'same'");
}
Shape Pooling1D::build_impl(const Shape& s) {
  require_rank(op_, s, 3, "(batch, steps, channels)");
  const int64_t stride = options_.strides.value_or(pool_size_);
  const auto [l, r] =
      window_padding(op_, s[1], pool_size_, stride, 1, Padding::parse(options_.padding, op_));
  return {s[0], window_out_length(op_, s[1], pool_size_, stride, 1, l, r), s[2]};
}
Tensor Pooling1D::forward_impl(const Tensor& x) {
  return pool_(x, pool_size_, options_.strides, Padding::parse(options_.padding, op_));
}

MaxPooling1D::MaxPooling1D(Pooling1DOptions options)
    : Pooling1D("max_pooling1d", &max_pool1d, std::move(options)) {}

AveragePooling1D::AveragePooling1D(Pooling1DOptions options)
    : Pooling1D("average_pooling1d", &avg_pool1d, std::move(options)) {}

Embedding::Embedding(int64_t input_dim, int64_t output_dim)
    : input_dim_(input_dim), output_dim_(output_dim) {
  ENCORE_CHECK(input_dim >= 1 && output_dim >= 1, ValueError,
               "[embedding] input_dim and output_dim must be >= 1, got ", input_dim, " and ",
               output_dim);
}
Shape Embedding::build_impl(const Shape& s) {
  ENCORE_CHECK(s.size() < kMaxDims, ShapeError, "[embedding] indices ", s.str(),
               " have too many axes for one more");
  checked_numel({input_dim_, output_dim_}, "embedding");
  embeddings_ = add_parameter("embeddings", uniform({input_dim_, output_dim_}, -0.05, 0.05));
  Shape out = s;
  out.push_back(output_dim_);
  return out;
}
Tensor Embedding::forward_impl(const Tensor& x) { return embedding(embeddings_, x); }

ActivationLayer::ActivationLayer(const std::string& activation)
    : activation_(parse_activation(activation)) {}
Tensor ActivationLayer::forward_impl(const Tensor& x) { return encore::activation(x, activation_); }

Shape Flatten::build_impl(const Shape& s) {
  ENCORE_CHECK(s.size() >= 1, ShapeError, "[flatten] expects a batch axis, got ", s.str());
  Shape features = s;
  features.erase(0);
  return {s[0], checked_numel(features, "flatten")};
}
Tensor Flatten::forward_impl(const Tensor& x) { return x.flatten(1); }

}  // namespace encore::nn

namespace encore::nn {
namespace {

// ---- rows ------------------------------------------------------------------------------
const LayerDef& dense_layer = define_layer({
    .name = "Dense",
    .signature = "Dense(units: int)",
    .options = &DenseOptions::fields,
    .make = [](const CallArgs& a) -> LayerPtr {
      return std::make_shared<Dense>(a.integer(0), options_of<DenseOptions>(a));
    },
    .doc = "y = activation(x @ kernel + bias) over the last axis; kernel (features, units).",
    .example = {.args = "units=3, activation='relu'", .input = {{2, 5, 4}}},
});
const LayerDef& conv1d_layer = define_layer({
    .name = "Conv1D",
    .signature = "Conv1D(filters: int, kernel_size: int)",
    .options = &Conv1DOptions::fields,
    .make = [](const CallArgs& a) -> LayerPtr {
      return std::make_shared<Conv1D>(a.integer(0), a.integer(1), options_of<Conv1DOptions>(a));
    },
    .doc = "1-D convolution over the steps of (batch, steps, channels); kernel (kernel_size, "
           "channels, filters).",
    .example = {.args = "filters=4, kernel_size=3, strides=2, padding='same', activation='tanh'",
                .input = {{2, 9, 3}}},
});
const LayerDef& dropout_layer = define_layer({
    .name = "Dropout",
    .signature = "Dropout(rate: float)",
    .make = [](const CallArgs& a) -> LayerPtr { return std::make_shared<Dropout>(a.real(0)); },
    .doc = "Inverted dropout: in training mode, zeroes each entry with probability rate and scales "
           "the rest by "
           "1 / (1 - rate); the identity in inference mode.",
    .example = {.args = "rate=0.5", .input = {{2, 5, 3}}},
});
const LayerDef& global_average_pooling1d_layer = define_layer({
    .name = "GlobalAveragePooling1D",
    .signature = "GlobalAveragePooling1D()",
    .make = [](const CallArgs&) -> LayerPtr { return std::make_shared<GlobalAveragePooling1D>(); },
    .doc = "The mean over the steps: (batch, steps, channels) -> (batch, channels).",
    .example = {.input = {{2, 5, 3}}},
});
const LayerDef& global_max_pooling1d_layer = define_layer({
    .name = "GlobalMaxPooling1D",
    .signature = "GlobalMaxPooling1D()",
    .make = [](const CallArgs&) -> LayerPtr { return std::make_shared<GlobalMaxPooling1D>(); },
    .doc = "The max over the steps: (batch, steps, channels) -> (batch, channels).",
    .example = {.input = {{2, 5, 3}, ExampleInput::Distinct}},
});
const LayerDef& max_pooling1d_layer = define_layer({
    .name = "MaxPooling1D",
    .signature = "MaxPooling1D()",
    .options = &Pooling1DOptions::fields,
    .make = [](const CallArgs& a) -> LayerPtr {
      return std::make_shared<MaxPooling1D>(options_of<Pooling1DOptions>(a));
    },
    .doc = "Keras MaxPooling1D: the max of each window of steps, (batch, steps, channels) -> "
           "(batch, windows, "
           "channels).",
    .example = {.args = "pool_size=3, strides=2, padding='same'",
                .input = {{2, 9, 3}, ExampleInput::Distinct}},
});
const LayerDef& average_pooling1d_layer = define_layer({
    .name = "AveragePooling1D",
    .signature = "AveragePooling1D()",
    .options = &Pooling1DOptions::fields,
    .make = [](const CallArgs& a) -> LayerPtr {
      return std::make_shared<AveragePooling1D>(options_of<Pooling1DOptions>(a));
    },
    .doc = "Keras AveragePooling1D: the mean of each window of steps; with 'same' padding a window "
           "averages its "
           "real steps only.",
    .example = {.args = "pool_size=2, padding='same'", .input = {{2, 7, 3}}},
});
const LayerDef& embedding_layer = define_layer({
    .name = "Embedding",
    .signature = "Embedding(input_dim: int, output_dim: int)",
    .make = [](const CallArgs& a) -> LayerPtr {
      return std::make_shared<Embedding>(a.integer(0), a.integer(1));
    },
    .doc = "Keras Embedding: int32/int64 indices of any shape (...) -> (..., output_dim), rows of "
           "an (input_dim, "
           "output_dim) table initialized uniform in [-0.05, 0.05]; an index outside [0, "
           "input_dim) is a "
           "ValueError.",
    .example = {.args = "input_dim=10, output_dim=4", .input = {{2, 5}, ExampleInput::Index, 10}},
});
const LayerDef& activation_layer = define_layer({
    .name = "Activation",
    .signature = "Activation(activation: str)",
    .make = [](const CallArgs& a) -> LayerPtr {
      return std::make_shared<ActivationLayer>(a.string(0));
    },
    .doc = "Keras Activation: applies an activation by name (linear, relu, tanh, sigmoid, "
           "hard_sigmoid, gelu, "
           "softmax). C++: ActivationLayer (Activation is the enum).",
    .example = {.args = "activation='gelu'", .input = {{2, 3, 4}}},
});
const LayerDef& flatten_layer = define_layer({
    .name = "Flatten",
    .signature = "Flatten()",
    .make = [](const CallArgs&) -> LayerPtr { return std::make_shared<Flatten>(); },
    .doc = "(batch, ...) -> (batch, product of the rest).",
    .example = {.input = {{2, 3, 4}}},
});

}  // namespace
}  // namespace encore::nn
