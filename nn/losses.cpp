#include "nn/losses.h"

#include "autograd/grad_mode.h"
#include "ops/ops.h"

namespace encore::nn {

namespace {
void require_same_shape(const char* loss, const Tensor& a, const Tensor& b) {
  ENCORE_CHECK(a.defined() && b.defined(), ValueError, "[", loss, "] undefined input");
  ENCORE_CHECK(a.shape() == b.shape(), ShapeError, "[", loss, "] targets ", a.shape().str(),
               " and predictions ", b.shape().str(), " differ in shape");
}
}  // namespace

Tensor binary_crossentropy(const Tensor& y_true, const Tensor& y_pred, bool from_logits) {
  require_same_shape("binary_crossentropy", y_true, y_pred);
  if (from_logits) return mean(softplus(y_pred) - y_pred * y_true);
  constexpr double kEps = 1e-7;
  const Tensor p = clip(y_pred, kEps, 1.0 - kEps);
  return neg(mean(y_true * log(p) + (1.0 - y_true) * log(1.0 - p)));
}

Tensor mean_squared_error(const Tensor& y_true, const Tensor& y_pred) {
  require_same_shape("mean_squared_error", y_true, y_pred);
  const Tensor d = y_pred - y_true;
  return mean(d * d);
}

Tensor sparse_categorical_crossentropy(const Tensor& labels, const Tensor& y_pred, bool from_logits) {
  ENCORE_CHECK(labels.defined() && y_pred.defined(), ValueError,
               "[sparse_categorical_crossentropy] undefined input");
  const Tensor logp = from_logits ? log_softmax(y_pred, -1) : log(clip(y_pred, 1e-7, 1.0));
  return neg(mean(gather_last(logp, labels)));
}

double binary_accuracy(const Tensor& y_true, const Tensor& y_pred, double threshold) {
  require_same_shape("binary_accuracy", y_true, y_pred);
  NoGradGuard no_grad;
  const Tensor predicted = gt(y_pred, threshold);
  return mean(eq(predicted, y_true)).item();
}

}  // namespace encore::nn
