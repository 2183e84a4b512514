// Keras normalization layers: BatchNormalization (batch statistics while training, moving
// statistics for inference) and LayerNormalization (each sample's own statistics).
#pragma once

#include "nn/layer.h"

namespace encore::nn {

#define ENCORE_BATCH_NORMALIZATION_OPTIONS(X)                                                      \
  X(int64_t, axis, -1, "the channels axis: statistics are per channel, over every other axis")     \
  X(double, momentum, 0.99, "of the moving statistics: m = m * momentum + batch * (1 - momentum)") \
  X(double, epsilon, 1e-3, "added to the variance before its square root")                         \
  X(bool, center, true, "learn an offset beta")                                                    \
  X(bool, scale, true, "learn a scale gamma")
ENCORE_LAYER_OPTIONS(BatchNormalizationOptions, ENCORE_BATCH_NORMALIZATION_OPTIONS);

/// Keras BatchNormalization. In training mode (encore::training()) it normalizes with the
/// mean and the biased variance of the batch (over every axis but `axis`) and updates the
/// buffers moving_mean and moving_variance as m = m * momentum + batch * (1 - momentum), with
/// that same biased variance, as Keras does; in inference mode it normalizes with the moving
/// statistics. The update is an in-place write, so a traced training step replays it; the
/// training mode is part of a trace's key, so switching it retraces instead of replaying.
class BatchNormalization : public Module {
 public:
  explicit BatchNormalization(BatchNormalizationOptions options = {});
  std::string type_name() const override { return "batch_normalization"; }
  const Tensor& moving_mean() const { return moving_mean_; }
  const Tensor& moving_variance() const { return moving_variance_; }

 protected:
  Shape build_impl(const Shape& input_shape) override;
  Tensor forward_impl(const Tensor& x) override;
  std::optional<graph::Lengths> output_lengths(const graph::Lengths& in, const Tensor& x,
                                               const Tensor& y) const override;

 private:
  Tensor normalize_training(const Tensor& x, int axis);
  BatchNormalizationOptions options_;
  Tensor gamma_, beta_, moving_mean_, moving_variance_;
};

#define ENCORE_LAYER_NORMALIZATION_OPTIONS(X)                              \
  X(int64_t, axis, -1, "the axis each sample is normalized along")         \
  X(double, epsilon, 1e-3, "added to the variance before its square root") \
  X(bool, center, true, "learn an offset beta")                            \
  X(bool, scale, true, "learn a scale gamma")
ENCORE_LAYER_OPTIONS(LayerNormalizationOptions, ENCORE_LAYER_NORMALIZATION_OPTIONS);

/// Keras LayerNormalization over one axis: each sample normalized by its own mean and biased
/// variance along `axis`, scaled by gamma and offset by beta. The same in training and
/// inference.
class LayerNormalization : public Module {
 public:
  explicit LayerNormalization(LayerNormalizationOptions options = {});
  std::string type_name() const override { return "layer_normalization"; }

 protected:
  Shape build_impl(const Shape& input_shape) override;
  Tensor forward_impl(const Tensor& x) override;
  std::optional<graph::Lengths> output_lengths(const graph::Lengths& in, const Tensor& x,
                                               const Tensor& y) const override;

 private:
  LayerNormalizationOptions options_;
  int64_t channels_ = 0;
  Tensor gamma_, beta_;
};

}  // namespace encore::nn
