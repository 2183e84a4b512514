// Losses (Keras argument order: targets first), each averaged over all elements/rows.
#pragma once

#include "core/tensor.h"

namespace encore::nn {

/// Binary cross-entropy. from_logits: `y_pred` are logits (numerically stable softplus
/// form); else probabilities, clipped to [1e-7, 1 - 1e-7] as in Keras.
Tensor binary_crossentropy(const Tensor& y_true, const Tensor& y_pred, bool from_logits = false);
Tensor mean_squared_error(const Tensor& y_true, const Tensor& y_pred);
/// labels: integer class ids (...,); y_pred: (..., classes) logits or probabilities.
Tensor sparse_categorical_crossentropy(const Tensor& labels, const Tensor& y_pred,
                                       bool from_logits = true);

/// Fraction of predictions on the right side of `threshold` (probabilities) — not differentiable.
double binary_accuracy(const Tensor& y_true, const Tensor& y_pred, double threshold = 0.5);

}  // namespace encore::nn
