#include "nn/normalization.h"

#include "core/modes.h"
#include "ops/ops.h"

namespace encore::nn {

namespace {

// The channels axis of an input of shape `s`, checked.
int channels_axis(const std::string& layer, int64_t axis, const Shape& s) {
  ENCORE_CHECK(s.size() >= 1, ShapeError, "[", layer, "] expects input with a channels axis, got ",
               s.str());
  return normalize_axis(axis, s.size(), layer.c_str());
}

// x is floating, of the dtype of the layer's weight, and has the channels the layer was built for.
int checked_input(const std::string& layer, int64_t axis, const Tensor& x, const Tensor& weight,
                  int64_t channels) {
  ENCORE_CHECK(is_floating(x.dtype()), DTypeError, "[", layer, "] expects floating input, got ",
               describe(x));
  ENCORE_CHECK(!weight.defined() || weight.dtype() == x.dtype(), DTypeError, "[", layer, "] input ",
               describe(x), " and the layer's ", name(weight.dtype()),
               " weights differ in dtype; convert one with .to(dtype)");
  const int ax = channels_axis(layer, axis, x.shape());
  ENCORE_CHECK(x.shape()[ax] == channels, ShapeError, "[", layer, "] input ", x.shape().str(),
               " has ", x.shape()[ax], " channels on axis ", axis, " but the layer was built for ",
               channels);
  return ax;
}

}  // namespace

BatchNormalization::BatchNormalization(BatchNormalizationOptions options) : options_(options) {
  ENCORE_CHECK(options_.epsilon > 0 && options_.momentum >= 0 && options_.momentum <= 1, ValueError,
               "[batch_normalization] epsilon must be > 0 and momentum in [0, 1], got epsilon ",
               options_.epsilon, " and momentum ", options_.momentum);
}

Shape BatchNormalization::build_impl(const Shape& s) {
  const int64_t c = s[channels_axis("batch_normalization", options_.axis, s)];
  if (options_.scale) gamma_ = add_parameter("gamma", ones({c}));
  if (options_.center) beta_ = add_parameter("beta", zeros({c}));
  moving_mean_ = add_buffer("moving_mean", zeros({c}));
  moving_variance_ = add_buffer("moving_variance", ones({c}));
  return s;
}

Tensor BatchNormalization::forward_impl(const Tensor& x) {
  const int axis = checked_input(label(), options_.axis, x, moving_mean_, moving_mean_.numel());
  // The only place the layer reads the training mode.
  if (is_training()) return normalize_training(x, axis);
  return batch_norm(x, moving_mean_, moving_variance_, gamma_, beta_, axis, options_.epsilon);
}

Tensor BatchNormalization::normalize_training(const Tensor& x, int axis) {
  ENCORE_CHECK(x.numel() > 0 || moving_mean_.numel() == 0, ValueError, "[", label(),
               "] cannot take batch statistics of the empty input ", x.shape().str(),
               " in training mode (inference mode uses the moving statistics)");
  std::vector<int64_t> axes;
  for (int d = 0; d < x.dim(); ++d)
    if (d != axis) axes.push_back(d);
  const auto [mean, variance] = graph::valid_moments(x, axes);  // a bucketed call: the valid steps
  {
    // Keras' update, with the biased batch variance that also normalizes the batch.
    NoGradGuard no_grad;
    const double m = options_.momentum;
    moving_mean_.copy_(moving_mean_ * m + mean * (1.0 - m));
    moving_variance_.copy_(moving_variance_ * m + variance * (1.0 - m));
  }
  return batch_norm(x, mean, variance, gamma_, beta_, axis, options_.epsilon);
}

LayerNormalization::LayerNormalization(LayerNormalizationOptions options) : options_(options) {
  ENCORE_CHECK(options_.epsilon > 0, ValueError, "[layer_normalization] epsilon must be > 0, got ",
               options_.epsilon);
}

Shape LayerNormalization::build_impl(const Shape& s) {
  channels_ = s[channels_axis("layer_normalization", options_.axis, s)];
  if (options_.scale) gamma_ = add_parameter("gamma", ones({channels_}));
  if (options_.center) beta_ = add_parameter("beta", zeros({channels_}));
  return s;
}

Tensor LayerNormalization::forward_impl(const Tensor& x) {
  const int axis =
      checked_input(label(), options_.axis, x, gamma_.defined() ? gamma_ : beta_, channels_);
  return layer_norm(x, gamma_, beta_, axis, options_.epsilon);
}

}  // namespace encore::nn

namespace encore::nn {
namespace {

const LayerDef& batch_normalization_layer = define_layer({
    .name = "BatchNormalization",
    .signature = "BatchNormalization()",
    .options = &BatchNormalizationOptions::fields,
    .make = [](const CallArgs& a) -> LayerPtr {
      return std::make_shared<BatchNormalization>(options_of<BatchNormalizationOptions>(a));
    },
    .doc = "Keras BatchNormalization: in training mode the batch's mean and biased variance, which "
           "also update "
           "the buffers moving_mean and moving_variance; in inference mode the moving statistics.",
    .example = {.args = "momentum=0.9", .input = {{4, 5, 3}}},
});
const LayerDef& layer_normalization_layer = define_layer({
    .name = "LayerNormalization",
    .signature = "LayerNormalization()",
    .options = &LayerNormalizationOptions::fields,
    .make = [](const CallArgs& a) -> LayerPtr {
      return std::make_shared<LayerNormalization>(options_of<LayerNormalizationOptions>(a));
    },
    .doc = "Keras LayerNormalization: each sample normalized by its own mean and biased variance "
           "along axis; the "
           "same in training and inference.",
    .example = {.args = "epsilon=0.01", .input = {{2, 5, 3}}},
});

}  // namespace
}  // namespace encore::nn
