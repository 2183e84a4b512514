// Losses (Keras argument order: targets first), each averaged over all elements/rows (in a
// bucketed trace, over the valid ones: graph/lengths.h).
#pragma once

#include "ops/tensor.h"

namespace encore::nn {

/// Binary cross-entropy. from_logits: `y_pred` are logits (numerically stable softplus
/// form). Else `y_pred` are probabilities: when they are the output of `sigmoid` (the op, or a
/// layer with activation "sigmoid") and neither they nor the logits were written in place
/// since, the loss is computed from the logits as with from_logits, as Keras 3 does (a
/// saturated output, BCE(0, sigmoid(20)), gives loss 20 and gradient 1 with respect to the
/// logit, not 16.1 and 0); other probabilities (views or copies of a sigmoid output included)
/// are clipped to [1e-7, 1 - 1e-7] as in Keras.
Tensor binary_crossentropy(const Tensor& y_true, const Tensor& y_pred, bool from_logits = false);
Tensor mean_squared_error(const Tensor& y_true, const Tensor& y_pred);
/// Keras categorical_crossentropy: y_true one-hot or probabilities (..., classes), y_pred
/// (..., classes); -sum(y_true * log p) over the class axis, averaged over the rest.
/// from_logits: p = softmax(y_pred), computed as log_softmax (stable). Else y_pred are
/// probabilities, taken as Keras 3 does: scaled to sum to 1 over the classes, then clipped to
/// [1e-7, 1 - 1e-7].
Tensor categorical_crossentropy(const Tensor& y_true, const Tensor& y_pred,
                                bool from_logits = false);
/// Keras sparse_categorical_crossentropy: labels are integer class ids (...,), y_pred
/// (..., classes) probabilities (normalized and clipped as in categorical_crossentropy) or,
/// with from_logits, logits. A label outside [0, classes) is a ValueError that names the loss
/// and the label (a traced step reports it when it replays, as an error of the gather inside
/// the loss).
Tensor sparse_categorical_crossentropy(const Tensor& labels, const Tensor& y_pred,
                                       bool from_logits = false);

/// Keras' sample_weight: while a SampleWeights is alive on this thread, the losses above (and
/// any loss that takes its mean with loss_mean) weight each row of their mean by `weights` (one
/// per row, axis 0): the mean of loss_i * w_i over the rows, as Keras' "sum_over_batch_size".
/// Model::fit and evaluate set it around the loss only (metrics stay unweighted, as Keras').
class SampleWeights {
 public:
  explicit SampleWeights(Tensor weights);
  ~SampleWeights();
  SampleWeights(const SampleWeights&) = delete;
  SampleWeights& operator=(const SampleWeights&) = delete;
  /// Whether a loss took its mean with these weights (undefined weights: false).
  bool used() const { return used_; }

 private:
  friend Tensor loss_mean(const Tensor& v, const Tensor& like);
  Tensor weights_;
  SampleWeights* previous_;
  bool used_ = false;
};

/// The mean a loss takes of its per-element values `v`: over the valid entries of a bucketed
/// trace (graph::valid_mean, `like` the predictions), each row weighted by the SampleWeights in
/// effect.
Tensor loss_mean(const Tensor& v, const Tensor& like);

/// Fraction of predictions on the right side of `threshold` (probabilities) — not differentiable.
double binary_accuracy(const Tensor& y_true, const Tensor& y_pred, double threshold = 0.5);

}  // namespace encore::nn
