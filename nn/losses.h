// Losses (Keras argument order: targets first), each averaged over all elements/rows.
#pragma once

#include "core/tensor.h"

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
/// labels: integer class ids (...,); y_pred: (..., classes) logits or probabilities. A label
/// outside [0, classes) is a ValueError that names the loss and the label (a traced step
/// reports it when it replays, as an error of the gather inside the loss).
Tensor sparse_categorical_crossentropy(const Tensor& labels, const Tensor& y_pred,
                                       bool from_logits = true);

/// Fraction of predictions on the right side of `threshold` (probabilities) — not differentiable.
double binary_accuracy(const Tensor& y_true, const Tensor& y_pred, double threshold = 0.5);

}  // namespace encore::nn
