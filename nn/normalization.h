// Keras normalization layers: BatchNormalization (batch statistics while training, moving
// statistics for inference) and LayerNormalization (each sample's own statistics).
#pragma once

#include "nn/module.h"

namespace encore::nn {

struct BatchNormalizationOptions {
  int64_t axis = -1;  // the channels axis (channels-last)
  double momentum = 0.99;
  double epsilon = 1e-3;
  bool center = true;  // beta, the offset
  bool scale = true;   // gamma, the scale
};

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
  std::optional<graph::Lengths> output_lengths(const graph::Lengths& in, const Tensor& x, const Tensor& y) const override;

 private:
  Tensor normalize_training(const Tensor& x, int axis);
  BatchNormalizationOptions options_;
  Tensor gamma_, beta_, moving_mean_, moving_variance_;
};

struct LayerNormalizationOptions {
  int64_t axis = -1;
  double epsilon = 1e-3;
  bool center = true;
  bool scale = true;
};

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
  std::optional<graph::Lengths> output_lengths(const graph::Lengths& in, const Tensor& x, const Tensor& y) const override;

 private:
  LayerNormalizationOptions options_;
  int64_t channels_ = 0;
  Tensor gamma_, beta_;
};

}  // namespace encore::nn
