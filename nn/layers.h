// Keras-style layers on batch-major, channels-last tensors: (batch, steps, channels). Each
// layer's options are one list (nn/layer.h): the C++ struct, the Python signature and
// docs/LAYERS.md are made from it; the rows are in nn/layers.cpp.
#pragma once

#include <optional>

#include "nn/layer.h"
#include "ops/activation.h"
#include "ops/window.h"

namespace encore::nn {

#define ENCORE_DENSE_OPTIONS(X)                                                           \
  X(std::string, activation, "linear", "applied to the output, by name (see Activation)") \
  X(bool, use_bias, true, "add a bias vector")
ENCORE_LAYER_OPTIONS(DenseOptions, ENCORE_DENSE_OPTIONS);

/// y = activation(x @ kernel + bias) over the last axis; kernel is (in, units).
class Dense : public Module {
 public:
  explicit Dense(int64_t units, DenseOptions options = {});
  std::string type_name() const override { return "dense"; }

 protected:
  Shape build_impl(const Shape& input_shape) override;
  Tensor forward_impl(const Tensor& x) override;
  std::optional<graph::Lengths> output_lengths(const graph::Lengths& in, const Tensor& x,
                                               const Tensor& y) const override;

 private:
  int64_t units_;
  Activation activation_;
  bool use_bias_;
  Tensor kernel_, bias_;
};

#define ENCORE_CONV1D_OPTIONS(X)                                                              \
  X(int64_t, strides, 1, "steps between the starts of two windows")                           \
  X(std::string, padding, "valid",                                                            \
    "'valid' (windows inside the input), 'same' (ceil(steps / strides) outputs) or 'causal' " \
    "(padded on the left: output t sees no later step)")                                      \
  X(int64_t, dilation_rate, 1, "steps between the taps of the kernel")                        \
  X(std::string, activation, "linear", "applied to the output, by name (see Activation)")     \
  X(bool, use_bias, true, "add a bias per filter")
ENCORE_LAYER_OPTIONS(Conv1DOptions, ENCORE_CONV1D_OPTIONS);

/// 1-D convolution over steps; kernel is (kernel_size, in_channels, filters).
class Conv1D : public Module {
 public:
  Conv1D(int64_t filters, int64_t kernel_size, Conv1DOptions options = {});
  std::string type_name() const override { return "conv1d"; }

 protected:
  Shape build_impl(const Shape& input_shape) override;
  Tensor forward_impl(const Tensor& x) override;
  std::optional<graph::Lengths> output_lengths(const graph::Lengths& in, const Tensor& x,
                                               const Tensor& y) const override;

 private:
  std::pair<Tensor, Padding> bucketed_input(const Tensor& x) const;
  int64_t filters_, kernel_size_;
  Conv1DOptions options_;
  Activation activation_;
  Tensor kernel_, bias_;
};

/// Inverted dropout, active only in training mode (Module::is_training).
class Dropout : public Module {
 public:
  explicit Dropout(double rate);
  std::string type_name() const override { return "dropout"; }

 protected:
  Shape build_impl(const Shape& input_shape) override { return input_shape; }
  Tensor forward_impl(const Tensor& x) override;
  std::optional<graph::Lengths> output_lengths(const graph::Lengths& in, const Tensor& x,
                                               const Tensor& y) const override;

 private:
  double rate_;
};

/// Mean over the steps axis: (batch, steps, channels) -> (batch, channels).
class GlobalAveragePooling1D : public Module {
 public:
  std::string type_name() const override { return "global_average_pooling1d"; }

 protected:
  Shape build_impl(const Shape& input_shape) override;
  Tensor forward_impl(const Tensor& x) override;
  std::optional<graph::Lengths> output_lengths(const graph::Lengths& in, const Tensor& x,
                                               const Tensor& y) const override;
};

/// Max over the steps axis: (batch, steps, channels) -> (batch, channels).
class GlobalMaxPooling1D : public Module {
 public:
  std::string type_name() const override { return "global_max_pooling1d"; }

 protected:
  Shape build_impl(const Shape& input_shape) override;
  Tensor forward_impl(const Tensor& x) override;
  std::optional<graph::Lengths> output_lengths(const graph::Lengths& in, const Tensor& x,
                                               const Tensor& y) const override;
};

#define ENCORE_POOLING1D_OPTIONS(X)                 \
  X(int64_t, pool_size, 2, "steps per window")      \
  X(std::optional<int64_t>, strides, std::nullopt,  \
    "steps between the starts of two windows "      \
    "(None: pool_size)")                            \
  X(std::string, padding, "valid",                  \
    "'valid' (windows inside the input) or 'same' " \
    "(ceil(steps / strides) outputs; a padded step never counts)")
ENCORE_LAYER_OPTIONS(Pooling1DOptions, ENCORE_POOLING1D_OPTIONS);

/// What MaxPooling1D and AveragePooling1D share: their options, checks and output shape; each
/// is its pooling op over windows of steps, (batch, steps, channels) -> (batch, windows, channels).
class Pooling1D : public Module {
 public:
  using PoolFn = Tensor (*)(const Tensor&, int64_t, std::optional<int64_t>, Padding);
  std::string type_name() const override { return op_; }

 protected:
  Pooling1D(const char* op, PoolFn pool, Pooling1DOptions options);
  Shape build_impl(const Shape& input_shape) override;
  Tensor forward_impl(const Tensor& x) override;
  std::optional<graph::Lengths> output_lengths(const graph::Lengths& in, const Tensor& x,
                                               const Tensor& y) const override;

 private:
  const char* op_;
  PoolFn pool_;
  int64_t pool_size_;
  Pooling1DOptions options_;
};

/// Keras MaxPooling1D: the max of each window of steps.
class MaxPooling1D : public Pooling1D {
 public:
  explicit MaxPooling1D(Pooling1DOptions options = {});
};

/// Keras AveragePooling1D: the mean of each window of steps; with 'same' padding a window
/// averages its real steps only.
class AveragePooling1D : public Pooling1D {
 public:
  explicit AveragePooling1D(Pooling1DOptions options = {});
};

/// Keras Embedding: int32/int64 indices of any shape (...) -> (..., output_dim), the rows of
/// an (input_dim, output_dim) table initialized uniform in [-0.05, 0.05] as in Keras. An
/// index outside [0, input_dim) is a ValueError (see encore::embedding).
class Embedding : public Module {
 public:
  Embedding(int64_t input_dim, int64_t output_dim);
  std::string type_name() const override { return "embedding"; }

 protected:
  Shape build_impl(const Shape& input_shape) override;
  Tensor forward_impl(const Tensor& x) override;
  std::optional<graph::Lengths> output_lengths(const graph::Lengths& in, const Tensor& x,
                                               const Tensor& y) const override;

 private:
  int64_t input_dim_, output_dim_;
  Tensor embeddings_;
};

/// Keras Activation (encore.nn.Activation in Python; here ActivationLayer, as the name
/// Activation is the enum): applies an activation by name ("relu", "gelu", "softmax", ...).
class ActivationLayer : public Module {
 public:
  explicit ActivationLayer(const std::string& activation);
  std::string type_name() const override { return "activation"; }

 protected:
  Shape build_impl(const Shape& input_shape) override { return input_shape; }
  Tensor forward_impl(const Tensor& x) override;
  std::optional<graph::Lengths> output_lengths(const graph::Lengths& in, const Tensor& x,
                                               const Tensor& y) const override;

 private:
  Activation activation_;
};

/// (batch, ...) -> (batch, product of the rest).
class Flatten : public Module {
 public:
  std::string type_name() const override { return "flatten"; }

 protected:
  Shape build_impl(const Shape& input_shape) override;
  Tensor forward_impl(const Tensor& x) override;
  std::optional<graph::Lengths> output_lengths(const graph::Lengths& in, const Tensor& x,
                                               const Tensor& y) const override;
};

}  // namespace encore::nn
