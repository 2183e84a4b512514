// The losses and metrics that Model::compile takes by name, and the metrics with state of their
// own (AUC, precision, recall): each a function of (targets, predictions) that a traced step
// records like any other op.
#include "graph/lengths.h"
#include "nn/losses.h"
#include "ops/ops.h"
#include "train/model.h"

namespace encore::nn {

namespace {

// Means over the valid entries in a bucketed trace (graph/lengths.h), as the losses.
Tensor mean_absolute_error(const Tensor& y, const Tensor& p) { return loss_mean(abs(p - y), p); }

LossFn binary_accuracy_fn(double threshold) {
  return [threshold](const Tensor& y, const Tensor& p) {
    return graph::valid_mean(eq(gt(p, threshold), y.to(p.dtype())), p);
  };
}

Tensor sparse_categorical_accuracy(const Tensor& labels, const Tensor& p) {
  // Ties with the largest score count as right (Keras' argmax takes the first).
  return graph::valid_mean(ge(gather_last(p, labels), max(p, {-1})), p);
}

}  // namespace

LossFn metric_by_name(const std::string& name, const Loss& loss) {
  const bool binary = loss.name.find("binary_crossentropy") != std::string::npos;
  const bool sparse = loss.name.find("sparse_categorical_crossentropy") != std::string::npos;
  if (name == "accuracy" || name == "acc") {
    if (binary) return binary_accuracy_fn(loss.from_logits ? 0.0 : 0.5);
    if (sparse) return sparse_categorical_accuracy;
    throw ValueError(detail::cat("[compile] metric '", name, "' needs a classification loss ",
                                 "(binary_crossentropy or sparse_categorical_crossentropy), got '",
                                 loss.name, "'"));
  }
  if (name == "binary_accuracy") return binary_accuracy_fn(0.5);
  if (name == "sparse_categorical_accuracy") return sparse_categorical_accuracy;
  if (name == "mse" || name == "mean_squared_error") return mean_squared_error;
  if (name == "mae" || name == "mean_absolute_error") return mean_absolute_error;
  throw ValueError(
      detail::cat("[compile] unknown metric '", name,
                  "': use accuracy, binary_accuracy, sparse_categorical_accuracy, mse, mae, auc, "
                  "precision, recall or a function"));
}

// Binary targets and predictions as float64 columns (rows, 1), for the count metrics.
namespace {

std::pair<Tensor, Tensor> binary_columns(const char* metric, const Tensor& y, const Tensor& p) {
  ENCORE_CHECK(y.defined() && p.defined() && y.numel() == p.numel(), ShapeError, "[", metric,
               "] needs binary targets with one value per prediction, got targets ",
               y.defined() ? describe(y) : "none", " and predictions ",
               p.defined() ? describe(p) : "none");
  ENCORE_CHECK(!graph::lengths_of(p), UnsupportedError, "[", metric,
               "] counts every entry: it is not supported under a bucket shape policy");
  return {y.to(DType::Float64).reshape({-1, 1}), p.reshape({-1, 1})};
}

double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }  // Keras' divide_no_nan

// Precision (`recall` false: true positives over predicted positives) or recall (over actual ones).
Metric precision_or_recall(bool recall, double threshold, std::string name) {
  const char* metric = recall ? "recall" : "precision";
  Metric m(std::move(name));
  m.width = 2;
  m.counts = [recall, threshold, metric](const Tensor& y, const Tensor& p) {
    const auto [ty, tp] = binary_columns(metric, y, p);
    const Tensor positive = gt(tp, threshold).to(DType::Float64);
    return concat({sum(positive * ty).reshape({1}), sum(recall ? ty : positive).reshape({1})}, 0);
  };
  m.result = [](const std::vector<double>& c) { return ratio(c[0], c[1]); };
  return m;
}

}  // namespace

Metric Metric::auc(int num_thresholds, std::string name) {
  ENCORE_CHECK(num_thresholds > 1, ValueError, "[auc] num_thresholds must be > 1, got ",
               num_thresholds);
  const int64_t n = num_thresholds;
  Metric m(std::move(name));
  m.width = 2 * n + 2;
  m.counts = [n](const Tensor& y, const Tensor& p) {
    const auto [ty, tp] = binary_columns("auc", y, p);
    // Keras' thresholds: 0 - eps, i / (n - 1) for 0 < i < n - 1, 1 + eps (in float64, then in the
    // predictions' dtype, as Keras compares them).
    constexpr double kEps = 1e-7;
    const Tensor i = arange(0, n, 1, DType::Float64, p.device());
    const Tensor t = i / static_cast<double>(n - 1) - eq(i, 0.0) * kEps +
                     eq(i, static_cast<double>(n - 1)) * kEps;
    const Tensor positive = gt(tp, t.to(p.dtype()).reshape({1, n})).to(DType::Float64);
    const Tensor positives = sum(ty);
    return concat({sum(positive * ty, {0}), sum(positive * (1.0 - ty), {0}), positives.reshape({1}),
                   (static_cast<double>(ty.numel()) - positives).reshape({1})},
                  0);
  };
  m.result = [n](const std::vector<double>& c) {
    const double positives = c[2 * n], negatives = c[2 * n + 1];
    double area = 0;
    for (int64_t i = 0; i + 1 < n; ++i) {
      const double tpr = ratio(c[i], positives), next_tpr = ratio(c[i + 1], positives);
      const double fpr = ratio(c[n + i], negatives), next_fpr = ratio(c[n + i + 1], negatives);
      area += (fpr - next_fpr) * (tpr + next_tpr) / 2;
    }
    return area;
  };
  return m;
}

Metric Metric::precision(double threshold, std::string name) {
  return precision_or_recall(false, threshold, std::move(name));
}

Metric Metric::recall(double threshold, std::string name) {
  return precision_or_recall(true, threshold, std::move(name));
}

Loss::Loss(const std::string& n) : name(n) {
  if (n == "binary_crossentropy")
    *this = binary_crossentropy();
  else if (n == "sparse_categorical_crossentropy")
    *this = sparse_categorical_crossentropy();
  else if (n == "mse" || n == "mean_squared_error")
    fn = mean_squared_error;
  else if (n == "mae" || n == "mean_absolute_error")
    fn = mean_absolute_error;
  else
    throw ValueError(detail::cat(
        "[compile] unknown loss '", n,
        "': use binary_crossentropy, sparse_categorical_crossentropy, mse, mae or a function"));
}

Loss::Loss(std::string n, LossFn f, bool logits)
    : name(std::move(n)), fn(std::move(f)), from_logits(logits) {
  ENCORE_CHECK(fn, ValueError, "[compile] loss '", name, "' has no function");
}

Loss Loss::binary_crossentropy(bool from_logits) {
  return {"binary_crossentropy",
          [from_logits](const Tensor& y, const Tensor& p) {
            return nn::binary_crossentropy(y, p, from_logits);
          },
          from_logits};
}

Loss Loss::sparse_categorical_crossentropy(bool from_logits) {
  return {"sparse_categorical_crossentropy",
          [from_logits](const Tensor& y, const Tensor& p) {
            return nn::sparse_categorical_crossentropy(y, p, from_logits);
          },
          from_logits};
}

}  // namespace encore::nn
