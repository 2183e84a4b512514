#include "nn/losses.h"

#include <algorithm>
#include <span>

#include "core/modes.h"
#include "graph/lengths.h"
#include "ops/ops.h"
#include "ops/sigmoid_origin.h"

namespace encore::nn {

namespace {

thread_local SampleWeights* current_weights = nullptr;

}  // namespace

SampleWeights::SampleWeights(Tensor weights)
    : weights_(std::move(weights)), previous_(current_weights) {
  current_weights = this;
}

SampleWeights::~SampleWeights() { current_weights = previous_; }

Tensor loss_mean(const Tensor& v, const Tensor& like) {
  if (!current_weights || !current_weights->weights_.defined()) return graph::valid_mean(v, like);
  const Tensor& w = current_weights->weights_;
  ENCORE_CHECK(v.dim() >= 1 && v.shape()[0] == w.numel(), ShapeError, "[sample_weight] ", w.numel(),
               " weights for a batch of ", v.dim() ? v.shape()[0] : 0, " rows (the loss's values ",
               describe(v), ")");
  if (const auto l = graph::lengths_of(like))
    ENCORE_CHECK(l->axis != 0, UnsupportedError,
                 "[sample_weight] is not supported with a bucket policy on the batch axis");
  current_weights->used_ = true;
  std::vector<int64_t> row(static_cast<size_t>(v.dim()), 1);
  row[0] = w.numel();
  return graph::valid_mean(v * w.to(v.dtype()).reshape(Shape(row)), like);
}

namespace {

// Inputs are checked here, so that a mistake is reported under the loss's name and not under
// an op inside it ("[mul] dtypes differ").
void check_pair(const char* loss, const Tensor& y_true, const Tensor& y_pred) {
  ENCORE_CHECK(y_true.defined() && y_pred.defined(), ValueError, "[", loss, "] undefined input");
  ENCORE_CHECK(y_true.shape() == y_pred.shape(), ShapeError, "[", loss, "] targets ",
               y_true.shape().str(), " and predictions ", y_pred.shape().str(), " differ in shape");
  ENCORE_CHECK(is_floating(y_pred.dtype()), DTypeError, "[", loss,
               "] predictions must be floating, got ", describe(y_pred));
  ENCORE_CHECK(y_true.dtype() == y_pred.dtype(), DTypeError, "[", loss, "] targets ",
               describe(y_true), " and predictions ", describe(y_pred),
               " differ in dtype; convert the targets with .to(", name(y_pred.dtype()), ")");
  ENCORE_CHECK(y_true.device() == y_pred.device(), DeviceError, "[", loss, "] targets ",
               describe(y_true), " and predictions ", describe(y_pred),
               " are on different devices");
}

// The logits `p` is the sigmoid of, while computing from them gives the loss of `p`: it came
// from sigmoid() and neither tensor was written in place (or given new storage) since. A
// probability tensor made without gradient tracking gets detached logits, so the loss does
// not track either; one whose gradient the caller asked for directly (a leaf) keeps its own.
Tensor sigmoid_logits(const Tensor& p) {
  const Tensor z = unchanged_sigmoid_logits(p);
  if (!z.defined()) return {};
  if (!p.requires_grad()) return z.detach();
  return p.is_leaf() ? Tensor() : z;
}

// `like`: the predictions as the caller passed them (what a bucketed trace registered).
Tensor binary_crossentropy_of_logits(const Tensor& y_true, const Tensor& z, const Tensor& like) {
  return loss_mean(binary_crossentropy_logits(z, y_true), like);
}

// Probabilities as Keras 3 takes them when not from_logits: scaled to sum to 1 over the class
// axis, then clipped to [1e-7, 1 - 1e-7] (its NumPy and JAX backends; TensorFlow's also reads
// the logits behind a softmax output, which encore does not record).
Tensor keras_log_probabilities(const Tensor& p) {
  constexpr double kEps = 1e-7;
  return log(clip(p / sum(p, {-1}, true), kEps, 1.0 - kEps));
}

// The first label outside [0, classes), for the message of a failed gather (read on the host:
// this only runs after the kernel has rejected the labels).
std::string bad_label(const Tensor& labels, int64_t classes) {
  const std::vector<int64_t> v = labels.to_vector<int64_t>();
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] < 0 || v[i] >= classes)
      return detail::cat("label ", v[i], " (element ", i, " of labels ", labels.shape().str(),
                         ") is out of range for ", classes, " classes");
  return {};
}

}  // namespace

Tensor binary_crossentropy(const Tensor& y_true, const Tensor& y_pred, bool from_logits) {
  check_pair("binary_crossentropy", y_true, y_pred);
  if (from_logits) return binary_crossentropy_of_logits(y_true, y_pred, y_pred);
  if (const Tensor z = sigmoid_logits(y_pred); z.defined())
    return binary_crossentropy_of_logits(y_true, z, y_pred);
  constexpr double kEps = 1e-7;
  const Tensor p = clip(y_pred, kEps, 1.0 - kEps);
  return neg(loss_mean(y_true * log(p) + (1.0 - y_true) * log(1.0 - p), y_pred));
}

Tensor mean_squared_error(const Tensor& y_true, const Tensor& y_pred) {
  check_pair("mean_squared_error", y_true, y_pred);
  const Tensor d = y_pred - y_true;
  return loss_mean(d * d, y_pred);
}

Tensor categorical_crossentropy(const Tensor& y_true, const Tensor& y_pred, bool from_logits) {
  const char* loss = "categorical_crossentropy";
  check_pair(loss, y_true, y_pred);
  ENCORE_CHECK(y_pred.dim() >= 1, ShapeError, "[", loss, "] predictions ", describe(y_pred),
               " need a class axis (the last)");
  const Tensor logp = from_logits ? log_softmax(y_pred, -1) : keras_log_probabilities(y_pred);
  return neg(loss_mean(sum(y_true * logp, {-1}), y_pred));
}

Tensor sparse_categorical_crossentropy(const Tensor& labels, const Tensor& y_pred,
                                       bool from_logits) {
  const char* loss = "sparse_categorical_crossentropy";
  ENCORE_CHECK(labels.defined() && y_pred.defined(), ValueError, "[", loss, "] undefined input");
  ENCORE_CHECK(labels.dtype() == DType::Int32 || labels.dtype() == DType::Int64, DTypeError, "[",
               loss, "] labels must be int32 or int64 class ids, got ", describe(labels));
  ENCORE_CHECK(is_floating(y_pred.dtype()), DTypeError, "[", loss,
               "] predictions must be floating, got ", describe(y_pred));
  Shape rows(std::span<const int64_t>(y_pred.shape().begin(), std::max(y_pred.dim() - 1, 0)));
  ENCORE_CHECK(y_pred.dim() >= 1 && labels.shape() == rows, ShapeError, "[", loss, "] labels ",
               labels.shape().str(), " must have the shape of the predictions ",
               y_pred.shape().str(), " without their last (class) axis");
  ENCORE_CHECK(labels.device() == y_pred.device(), DeviceError, "[", loss, "] labels ",
               describe(labels), " and predictions ", describe(y_pred),
               " are on different devices");
  const Tensor logp = from_logits ? log_softmax(y_pred, -1) : keras_log_probabilities(y_pred);
  Tensor picked;
  try {
    picked = gather_last(logp, labels);
  } catch (const ValueError&) {
    const std::string what = bad_label(labels, y_pred.shape().back());
    if (what.empty()) throw;
    throw ValueError(detail::cat("[", loss, "] ", what));
  }
  return neg(loss_mean(picked, y_pred));
}

double binary_accuracy(const Tensor& y_true, const Tensor& y_pred, double threshold) {
  check_pair("binary_accuracy", y_true, y_pred);
  NoGradGuard no_grad;
  const Tensor predicted = gt(y_pred, threshold);
  return mean(eq(predicted, y_true)).item();
}

}  // namespace encore::nn
