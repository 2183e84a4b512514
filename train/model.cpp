#include "train/model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "core/dist.h"
#include "core/ledger.h"
#include "core/modes.h"
#include "graph/lengths.h"
#include "nn/distributed.h"
#include "nn/losses.h"
#include "nn/resume.h"
#include "ops/collective.h"
#include "ops/ops.h"
#include "train/progress.h"

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

LossFn metric_fn(const std::string& name, const Loss& loss) {
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

namespace {

// A batch's sample weights: its own, else those of its rows' classes (Keras' class_weight: the
// argmax of a one-hot row, else the rounded label), else none.
Tensor batch_weights(const Batch& b, const std::map<int64_t, double>& class_weight) {
  if (b.sample_weight.defined() || class_weight.empty()) return b.sample_weight;
  const Tensor& y = b.y;
  const int64_t rows = y.dim() ? y.shape()[0] : 1;
  const bool one_hot = y.dim() == 2 && y.shape()[1] > 1;
  ENCORE_CHECK(one_hot || y.numel() == rows, ShapeError,
               "[fit] class_weight needs one label per row (or one-hot rows), got targets ",
               describe(y));
  const std::vector<double> v = y.detach().to(DType::Float64).to_vector<double>();
  const int64_t width = one_hot ? y.shape()[1] : 1;
  std::vector<float> w(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) {
    const auto row = v.begin() + i * width;
    const int64_t label = one_hot ? std::max_element(row, row + width) - row : std::llround(v[i]);
    const auto it = class_weight.find(label);
    w[i] = static_cast<float>(it == class_weight.end() ? 1.0 : it->second);
  }
  return from_vector(w, {rows});
}

constexpr const char* kOptimizers[] = {"sgd", "adam", "adamw", "rmsprop"};

std::shared_ptr<Optimizer> make_optimizer(const std::string& name, std::vector<Tensor> params) {
  if (name == "sgd") return std::make_shared<SGD>(std::move(params));
  if (name == "adam") return std::make_shared<Adam>(std::move(params));
  if (name == "adamw") return std::make_shared<AdamW>(std::move(params));
  if (name == "rmsprop") return std::make_shared<RMSprop>(std::move(params));
  throw ValueError("[compile] unknown optimizer '" + name +
                   "': use sgd, adam, adamw, rmsprop or an optimizer");
}

// Puts every module back in the mode it had (fit trains in training mode).
class ModeRestore {
 public:
  explicit ModeRestore(Module& root) {
    for (Module* m : root.modules()) saved_.emplace_back(m, m->training_flag());
  }
  // Parents come before their descendants: each train() is overridden by the deeper ones.
  ~ModeRestore() {
    for (auto [m, on] : saved_) m->train(on);
  }
  ModeRestore(const ModeRestore&) = delete;
  ModeRestore& operator=(const ModeRestore&) = delete;

 private:
  std::vector<std::pair<Module*, bool>> saved_;
};

// Ledger counters at the start of a fit, for its cost summary.
struct CostMark {
  std::array<int64_t, static_cast<int>(Counter::Count)> counters{};
  std::vector<std::pair<const TracedFunction*, int64_t>> traces;  // records seen per function
  static CostMark now(std::initializer_list<const TracedFunction*> fns) {
    CostMark m;
    for (int i = 0; i < static_cast<int>(Counter::Count); ++i)
      m.counters[i] = Ledger::global().get(Counter(i));
    for (const TracedFunction* f : fns)
      if (f) m.traces.emplace_back(f, f->stats().traces);
    return m;
  }
  int64_t since(Counter c) const { return Ledger::global().get(c) - counters[static_cast<int>(c)]; }
  int64_t traces_before(const TracedFunction* f) const {
    for (const auto& [g, n] : traces)
      if (g == f) return n;
    return 0;
  }
};

std::string ms(int64_t ns) { return format_duration(static_cast<double>(ns) / 1e9); }

std::string per(int64_t ns, int64_t n) { return ms(n ? ns / n : 0); }

}  // namespace

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

Model::Model(std::shared_ptr<Module> module) : module_(std::move(module)) {
  ENCORE_CHECK(module_, ValueError, "[model] needs a module");
}

void Model::compile(OptimizerSpec optimizer, Loss loss, CompileOptions options) {
  ENCORE_CHECK(optimizer.optimizer || !optimizer.name.empty(), ValueError,
               "[compile] needs an optimizer");
  ENCORE_CHECK(optimizer.optimizer ||
                   std::count(std::begin(kOptimizers), std::end(kOptimizers), optimizer.name),
               ValueError, "[compile] unknown optimizer '", optimizer.name,
               "': use sgd, adam, adamw, rmsprop or an optimizer");
  std::vector<Metric> metrics = options.metrics;
  for (Metric& m : metrics) {
    if (m.fn || m.counts) continue;
    if (m.name == "auc")
      m = Metric::auc();
    else if (m.name == "precision")
      m = Metric::precision();
    else if (m.name == "recall")
      m = Metric::recall();
    else
      m.fn = metric_fn(m.name, loss);
  }
  for (size_t i = 0; i < metrics.size(); ++i)
    for (size_t j = 0; j <= i; ++j)
      ENCORE_CHECK(metrics[i].name != (j < i ? metrics[j].name : "loss"), ValueError,
                   "[compile] metric name '", metrics[i].name,
                   "' is used twice (the loss is logged as 'loss')");
  // A model built later (by its first batch) is checked before its first update.
  if (optimizer.optimizer && module_->built())
    check_covers(*optimizer.optimizer, *module_, "compile");
  optimizer_checked_ = module_->built();
  optimizer_ = std::move(optimizer.optimizer);
  optimizer_name_ = std::move(optimizer.name);
  loss_ = std::move(loss);
  metrics_ = std::move(metrics);
  options_ = std::move(options);
  train_fn_.reset();
  test_fn_.reset();
  predict_fn_.reset();
  weighted_train_fn_.reset();
  weighted_test_fn_.reset();
  train_acc_ = test_acc_ = {};
  compiled_ = true;
}

void Model::set_output(std::function<void(const std::string&)> write,
                       std::optional<bool> interactive) {
  output_ = std::move(write);
  interactive_ = interactive;
}

ProgressBar Model::progress_bar(int verbose) const {
  return ProgressBar(verbose, output_, interactive_.value_or(ProgressBar::stdout_is_terminal()));
}

void Model::require_compiled(const char* what) const {
  ENCORE_CHECK(compiled_, ValueError, "[", what,
               "] compile the model first (optimizer, loss, metrics)");
}

std::vector<std::string> Model::log_names() const {
  std::vector<std::string> names{"loss"};
  for (const Metric& m : metrics_) names.push_back(m.name);
  return names;
}

// Builds the module from the first batch, makes a named optimizer, the accumulators and the
// traced steps. Called per batch: after the first, it checks where the parameters live, and
// is done.
void Model::prepare(const Tensor& x) {
  if (!module_->built()) {
    module_->build(x.shape());
    module_->to(x.device());
  }
  if (!probe_.defined()) {
    const std::vector<Tensor> params = module_->parameters();
    if (!params.empty()) probe_ = params[0];
  }
  device_ = probe_.defined() ? probe_.device() : x.device();
  auto make = [&](const char* name, std::vector<std::string> args, TracedFunction::Fn fn) {
    TraceOptions o;
    o.name = name;
    o.shapes = options_.shapes;
    o.arg_names = std::move(args);
    return std::make_unique<TracedFunction>(std::move(fn), std::move(o));
  };
  if (options_.mode == ExecutionMode::Traced && !predict_fn_)
    predict_fn_ = make("predict_step", {"x"}, [this](const std::vector<Arg>& a) {
      return std::vector<Tensor>{predict_step(std::get<Tensor>(a[0]))};
    });
  if (!compiled_) return;
  if (!optimizer_) optimizer_ = make_optimizer(optimizer_name_, module_->parameters());
  if (!train_acc_.sums.defined() || train_acc_.sums.device() != device_) {
    for (Accumulator* acc : {&train_acc_, &test_acc_}) {
      int64_t slots = 1;
      for (const Metric& m : metrics_) slots += m.counts ? m.width : 1;
      acc->sums = zeros({slots}, DType::Float64, device_);
      acc->rows = zeros({}, DType::Float64, device_);
    }
  }
  if (options_.mode == ExecutionMode::Eager || train_fn_) return;
  // Each step with weights (a third input) or without: the latter's graph has no weights in it.
  auto step = [&](const char* name, bool weighted,
                  void (Model::*fn)(const Tensor&, const Tensor&, const Tensor&)) {
    std::vector<std::string> args{"x", "y"};
    if (weighted) args.push_back("sample_weight");
    return make(name, std::move(args), [this, weighted, fn](const std::vector<Arg>& a) {
      (this->*fn)(std::get<Tensor>(a[0]), std::get<Tensor>(a[1]),
                  weighted ? std::get<Tensor>(a[2]) : Tensor());
      return std::vector<Tensor>{};
    });
  };
  train_fn_ = step("train_step", false, &Model::train_step);
  test_fn_ = step("test_step", false, &Model::test_step);
  weighted_train_fn_ = step("train_step_weighted", true, &Model::train_step);
  weighted_test_fn_ = step("test_step_weighted", true, &Model::test_step);
}

Tensor Model::on_device(const Tensor& t) const { return t.device() == device_ ? t : t.to(device_); }

Tensor Model::loss_of(const Tensor& y, const Tensor& pred, const Tensor& w) const {
  Tensor loss;
  bool weighed = false;
  {
    const SampleWeights weights(w);  // the built-in losses weigh their rows (nn/losses.h)
    loss = loss_->fn(y, pred);
    weighed = weights.used();
  }
  ENCORE_CHECK(loss.defined(), ValueError, "[", loss_->name, "] the loss gave nothing");
  if (loss.dim() >= 1) {
    // A function's loss per row (Keras' form), reduced here, with the weights.
    const SampleWeights weights(w);
    return loss_mean(loss, pred);
  }
  ENCORE_CHECK(!w.defined() || weighed, ValueError, "[", loss_->name,
               "] sample_weight and class_weight need a loss that weighs rows: a built-in loss, or "
               "a function "
               "that returns one loss per row (shape (batch,)) instead of their mean");
  return loss;
}

void Model::accumulate(Accumulator& acc, const Tensor& loss, const Tensor& y, const Tensor& pred) {
  NoGradGuard no_grad;
  const double rows = static_cast<double>(pred.dim() ? pred.shape()[0] : 1);
  // A bucketed trace: the metrics see the valid entries as the loss did, and a batch-axis
  // bucket counts the real rows (graph/lengths.h).
  const Tensor p = pred.detach();
  Tensor real_rows;
  if (const auto l = graph::lengths_of(pred)) {
    graph::set_lengths(p, *l);
    if (l->axis == 0) real_rows = l->length.to(DType::Float64).reshape({});
  }
  // Means are summed weighted by the batch's rows; counts as they are.
  auto weighted = [&](const Tensor& v) { return real_rows.defined() ? v * real_rows : v * rows; };
  std::vector<Tensor> values{weighted(loss.detach().to(DType::Float64).reshape({1}))};
  for (const Metric& m : metrics_) {
    if (m.counts) {
      const Tensor c = m.counts(y, p);
      ENCORE_CHECK(c.numel() == m.width, ShapeError, "[", m.name, "] gave ", c.numel(),
                   " counts, not ", m.width);
      values.push_back(c.to(DType::Float64).reshape({m.width}));
      continue;
    }
    const Tensor v = m.fn(y, p);
    ENCORE_CHECK(v.numel() == 1, ShapeError, "[", m.name, "] a metric must give a scalar, got ",
                 describe(v));
    values.push_back(weighted(v.to(DType::Float64).reshape({1})));
  }
  acc.sums.copy_(acc.sums + concat(values, 0));
  if (real_rows.defined())
    acc.rows.copy_(acc.rows + real_rows);
  else
    acc.rows.copy_(acc.rows + rows);
}

void Model::train_step(const Tensor& x, const Tensor& y, const Tensor& w) {
  optimizer_->zero_grad();
  const Tensor pred = (*module_)(x);
  const Tensor loss = loss_of(y, pred, w);
  loss.backward();
  optimizer_->step();
  accumulate(train_acc_, loss, y, pred);
}

// One update in training mode, through the traced step or eagerly.
void Model::run_train_step(const Tensor& x, const Tensor& y, const Tensor& w) {
  TrainingGuard training(true);
  EnableGradGuard grad;
  if (!optimizer_checked_) {
    check_covers(*optimizer_, *module_, "fit");
    optimizer_checked_ = true;
  }
  optimizer_->match_param_dtypes();  // after Module::to(dtype): outside the traced step
  const Tensor bx = on_device(x), by = on_device(y);
  if (w.defined() && weighted_train_fn_)
    (*weighted_train_fn_)({bx, by, on_device(w)});
  else if (train_fn_ && !w.defined())
    (*train_fn_)({bx, by});
  else
    train_step(bx, by, w.defined() ? on_device(w) : w);
  ++iterations_;
}

void Model::test_step(const Tensor& x, const Tensor& y, const Tensor& w) {
  const Tensor pred = (*module_)(x);
  accumulate(test_acc_, loss_of(y, pred, w), y, pred);
}

Tensor Model::predict_step(const Tensor& x) { return (*module_)(x); }

void Model::reset(Accumulator& acc) {
  acc.sums.zero_();
  acc.rows.zero_();
}

Logs Model::read(const Accumulator& acc, const std::string& prefix) const {
  Logs logs;
  if (!acc.sums.defined()) return logs;
  const std::vector<double> sums = acc.sums.to_vector<double>();
  const double rows = acc.rows.item();
  logs[prefix + "loss"] = sums[0] / rows;
  size_t at = 1;
  for (const Metric& m : metrics_) {
    if (m.counts) {
      logs[prefix + m.name] = m.result({sums.begin() + at, sums.begin() + at + m.width});
      at += m.width;
    } else {
      logs[prefix + m.name] = sums[at++] / rows;
    }
  }
  return logs;
}

Logs Model::running_logs() const { return read(train_acc_, ""); }

bool Model::data_parallel() const {
  return optimizer_ && optimizer_->distributed() && dist::size() > 1;
}

Logs Model::read_all_ranks(const Accumulator& acc) const {
  if (!data_parallel() || !acc.sums.defined()) return read(acc, "");
  const NoGradGuard no_grad;
  const Accumulator all{dist::all_reduce(acc.sums), dist::all_reduce(acc.rows)};
  return read(all, "");
}

History Model::fit(const Tensor& x, const Tensor& y, FitOptions options) {
  require_compiled("fit");
  ENCORE_CHECK(
      x.defined() && y.defined() && x.dim() >= 1 && y.dim() >= 1 && x.shape()[0] == y.shape()[0],
      ShapeError, "[fit] x and y must have the same number of rows, got ",
      x.defined() ? describe(x) : "none", " and ", y.defined() ? describe(y) : "none");
  ENCORE_CHECK(options.validation_split >= 0 && options.validation_split < 1, ValueError,
               "[fit] validation_split must be in [0, 1), got ", options.validation_split);
  ENCORE_CHECK(options.validation_split == 0 || !options.validation_data, ValueError,
               "[fit] give validation_split or validation_data, not both");
  int64_t rows = x.shape()[0];
  if (options.validation_split > 0) {
    const auto held = static_cast<int64_t>(static_cast<double>(rows) * options.validation_split);
    ENCORE_CHECK(held >= 1 && held < rows, ValueError, "[fit] validation_split ",
                 options.validation_split, " of ", rows,
                 " rows leaves no rows for validation or for training");
    const Tensor& w = options.sample_weight;
    options.validation_data = std::make_shared<ArrayDataset>(
        x.slice(0, rows - held, rows), y.slice(0, rows - held, rows), options.batch_size, false, 0,
        w.defined() ? w.slice(0, rows - held, rows) : Tensor());
    rows -= held;
  }
  const Tensor& w = options.sample_weight;
  ArrayDataset train(x.slice(0, 0, rows), y.slice(0, 0, rows), options.batch_size, options.shuffle,
                     options.seed, w.defined() ? w.slice(0, 0, rows) : Tensor());
  return fit(train, std::move(options));
}

History Model::fit(Dataset& all_data, FitOptions options) {
  require_compiled("fit");
  ENCORE_CHECK(options.epochs >= 0 && options.initial_epoch >= 0, ValueError,
               "[fit] epochs and initial_epoch must be >= 0, got ", options.epochs, " and ",
               options.initial_epoch);
  const bool parallel = data_parallel();
  ShardedDataset shard(all_data, dist::rank(), dist::size());
  Dataset& data = parallel ? static_cast<Dataset&>(shard) : all_data;
  if (parallel && dist::rank() != 0) options.verbose = 0;
  bool weights_shared = !parallel;
  ProgressBar bar = progress_bar(options.verbose);
  const CostMark mark = CostMark::now(
      {train_fn_.get(), test_fn_.get(), weighted_train_fn_.get(), weighted_test_fn_.get()});
  const int64_t steps_before = iterations_;
  const ModeRestore modes(*module_);
  module_->train(true);
  stop_training = false;
  bool batch_hooks = false;
  for (const auto& cb : options.callbacks) {
    ENCORE_CHECK(cb, ValueError, "[fit] a callback is null");
    batch_hooks = batch_hooks || cb->wants_batches();
  }
  std::vector<std::string> names = log_names();
  if (options.validation_data)
    for (const std::string& n : log_names()) names.push_back("val_" + n);

  ENCORE_CHECK(options.steps_per_epoch >= 0, ValueError, "[fit] steps_per_epoch must be >= 0, got ",
               options.steps_per_epoch);
  const int64_t per_epoch = options.steps_per_epoch;
  // With steps_per_epoch a pass goes on across epochs: the batches it gave so far.
  int64_t pass_batches = -1;

  History history;
  for (const auto& cb : options.callbacks) cb->on_train_begin(*this);
  for (int epoch = options.initial_epoch; epoch < options.epochs && !stop_training; ++epoch) {
    for (const auto& cb : options.callbacks) cb->on_epoch_begin(*this, epoch);
    if (!per_epoch || pass_batches < 0) {
      data.start(epoch);
      pass_batches = 0;
    }
    bar.start(per_epoch ? per_epoch : data.size(),
              detail::cat("Epoch ", epoch + 1, "/", options.epochs), names);
    int64_t batch = 0;
    while (!stop_training && (!per_epoch || batch < per_epoch)) {
      std::optional<Batch> b = data.next();
      if (!b && per_epoch && pass_batches > 0) {
        data.start(epoch);  // the pass ended: another, as Keras does for data it can read again
        pass_batches = 0;
        b = data.next();
      }
      if (!b) break;
      ++pass_batches;
      ENCORE_CHECK(b->x.defined() && b->y.defined(), ValueError, "[fit] batch ", batch, " has no ",
                   b->x.defined() ? "targets" : "inputs");
      prepare(b->x);
      if (!weights_shared) {  // every rank starts from rank 0's weights
        dist::broadcast_parameters(*module_);
        weights_shared = true;
      }
      if (batch_hooks)
        for (const auto& cb : options.callbacks) cb->on_batch_begin(*this, batch);
      if (batch == 0) reset(train_acc_);
      run_train_step(b->x, b->y, batch_weights(*b, options.class_weight));
      ++batch;
      if (batch_hooks)
        for (const auto& cb : options.callbacks) cb->on_batch_end(*this, batch - 1);
      bar.update(batch, [this] { return running_logs(); });
    }
    if (per_epoch && batch < per_epoch && !stop_training) {
      // Keras: "Your input ran out of data; interrupting training."
      history.warning =
          detail::cat("[fit] the training data ran out after ", batch, " of ", per_epoch,
                      " steps of epoch ", epoch + 1,
                      ": training stops (a one-shot iterable, such "
                      "as a generator, gives steps_per_epoch * epochs batches at most)");
      stop_training = true;
      if (batch == 0) break;
    }
    ENCORE_CHECK(batch > 0, ValueError, "[fit] the training data gave no batches in epoch ",
                 epoch + 1,
                 " (an iterable that can be read only once, such as a generator, gives none after "
                 "the first: "
                 "pass steps_per_epoch, or an iterable whose __iter__ starts afresh)");
    Logs logs = read_all_ranks(train_acc_);
    if (options.validation_data) {
      const Logs val = evaluate_pass(*options.validation_data, nullptr);
      for (const auto& [k, v] : val) logs["val_" + k] = v;
    }
    epoch_ = epoch + 1;
    for (const auto& cb : options.callbacks) cb->on_epoch_end(*this, epoch, logs);
    history.epoch.push_back(epoch);
    for (const auto& [k, v] : logs) history.history[k].push_back(v);
    bar.finish(batch, logs);
  }
  for (const auto& cb : options.callbacks) cb->on_train_end(*this);
  if (!history.warning.empty() && options.verbose > 0) {
    if (output_)
      output_(history.warning + "\n");
    else
      std::cerr << history.warning << std::endl;
  }

  // The cost summary, from the ledger and the traced steps' records.
  const int64_t steps = iterations_ - steps_before;
  if (options_.mode == ExecutionMode::Eager) {
    history.cost = detail::cat("cost (eager): ", steps, " training steps, ",
                               mark.since(Counter::OpsDispatched), " ops dispatched in ",
                               ms(mark.since(Counter::DispatchNs)), " (",
                               per(mark.since(Counter::DispatchNs), steps), " per step)");
  } else {
    std::string traces;
    int64_t n = 0;
    for (const TracedFunction* f :
         {train_fn_.get(), test_fn_.get(), weighted_train_fn_.get(), weighted_test_fn_.get()}) {
      if (!f) continue;
      const TraceStats& s = f->stats();
      const int64_t new_traces = s.traces - mark.traces_before(f);
      n += new_traces;
      const int64_t shown = std::min<int64_t>(new_traces, static_cast<int64_t>(s.records.size()));
      for (int64_t i = static_cast<int64_t>(s.records.size()) - shown;
           i < static_cast<int64_t>(s.records.size()); ++i)
        traces += detail::cat(traces.empty() ? "" : "; ", f->options().name, " call ",
                              s.records[i].call, ": ", s.records[i].reason);
    }
    const int64_t tracing = mark.since(Counter::TraceNs) + mark.since(Counter::OptimizeNs) +
                            mark.since(Counter::PlanNs) + mark.since(Counter::CaptureNs) +
                            mark.since(Counter::InstantiateNs);
    const int64_t replays = mark.since(Counter::Replays), replay_ns = mark.since(Counter::ReplayNs);
    history.cost = detail::cat("cost (traced): ", n, " traces", n ? " (" + traces + ")" : "", ", ",
                               replays, " replays; tracing ", ms(tracing), ", replaying ",
                               ms(replay_ns), " (", per(replay_ns, replays), " per replay)");
  }
  if (options.verbose > 0) {
    if (output_)
      output_(history.cost + "\n");
    else
      std::cout << history.cost << std::endl;
  }
  return history;
}

Logs Model::evaluate_pass(Dataset& all_data, ProgressBar* bar) {
  ShardedDataset shard(all_data, dist::rank(), dist::size());
  const bool parallel = data_parallel();
  Dataset& data = parallel ? static_cast<Dataset&>(shard) : all_data;
  if (parallel && dist::rank() != 0) bar = nullptr;
  data.start(0);
  if (bar) bar->start(data.size(), "", log_names());
  int64_t batch = 0;
  while (std::optional<Batch> b = data.next()) {
    ENCORE_CHECK(b->x.defined() && b->y.defined(), ValueError, "[evaluate] batch ", batch,
                 " has no ", b->x.defined() ? "targets" : "inputs");
    prepare(b->x);
    if (batch == 0) reset(test_acc_);
    TrainingGuard inference(false);
    NoGradGuard no_grad;
    const Tensor bx = on_device(b->x), by = on_device(b->y);
    const Tensor bw = b->sample_weight.defined() ? on_device(b->sample_weight) : Tensor();
    if (bw.defined() && weighted_test_fn_)
      (*weighted_test_fn_)({bx, by, bw});
    else if (test_fn_ && !bw.defined())
      (*test_fn_)({bx, by});
    else
      test_step(bx, by, bw);
    ++batch;
    if (bar) bar->update(batch, [&] { return read(test_acc_, ""); });
  }
  ENCORE_CHECK(batch > 0, ValueError, "[evaluate] the data gave no batches");
  const Logs logs = read_all_ranks(test_acc_);
  if (bar) bar->finish(batch, logs);
  return logs;
}

Logs Model::evaluate(const Tensor& x, const Tensor& y, int64_t batch_size, int verbose,
                     const Tensor& sample_weight) {
  ArrayDataset data(x, y, batch_size, false, 0, sample_weight);
  return evaluate(data, verbose);
}

Logs Model::evaluate(Dataset& data, int verbose) {
  require_compiled("evaluate");
  ProgressBar bar = progress_bar(verbose);
  return evaluate_pass(data, verbose > 0 ? &bar : nullptr);
}

Tensor Model::predict(const Tensor& x, int64_t batch_size, int verbose) {
  ArrayDataset data(x, Tensor(), batch_size);
  return predict(data, verbose);
}

Tensor Model::predict(Dataset& data, int verbose) {
  ProgressBar bar = progress_bar(verbose);
  data.start(0);
  bar.start(data.size(), "", {});
  std::vector<Tensor> outputs;
  while (std::optional<Batch> b = data.next()) {
    outputs.push_back(predict_on_batch(b->x));
    bar.update(static_cast<int64_t>(outputs.size()), [] { return Logs{}; });
  }
  ENCORE_CHECK(!outputs.empty(), ValueError, "[predict] the data gave no batches");
  bar.finish(static_cast<int64_t>(outputs.size()), {});
  return outputs.size() == 1 ? outputs[0] : concat(outputs, 0);
}

Logs Model::train_on_batch(const Tensor& x, const Tensor& y, const Tensor& sample_weight) {
  require_compiled("train_on_batch");
  prepare(x);
  const ModeRestore modes(*module_);
  module_->train(true);
  reset(train_acc_);
  run_train_step(x, y, sample_weight);
  return running_logs();
}

Logs Model::test_on_batch(const Tensor& x, const Tensor& y) {
  require_compiled("test_on_batch");
  ArrayDataset data(x, y, std::max<int64_t>(x.defined() && x.dim() ? x.shape()[0] : 1, 1));
  return evaluate_pass(data, nullptr);
}

Tensor Model::predict_on_batch(const Tensor& x) {
  ENCORE_CHECK(x.defined(), ValueError, "[predict] x is undefined");
  prepare(x);
  TrainingGuard inference(false);
  NoGradGuard no_grad;
  const Tensor bx = on_device(x);
  if (predict_fn_) return (*predict_fn_)({bx})[0];
  return predict_step(bx);
}

void Model::save_checkpoint(const std::string& path) const {
  if (optimizer_) optimizer_->match_param_dtypes();
  // Data-parallel ranks hold the same weights and state: rank 0 writes (atomically, as always).
  if (data_parallel() && dist::rank() != 0) return;
  nn::save_checkpoint(path, *module_, optimizer_.get(),
                      {{"checkpoint.iterations", std::to_string(iterations_)},
                       {"checkpoint.epoch", std::to_string(epoch_)}});
}

void Model::load_checkpoint(const std::string& path) {
  ENCORE_CHECK(module_->built(), ValueError,
               "[load_checkpoint] build the model first (fit, or Module::build)");
  if (compiled_ && !optimizer_) optimizer_ = make_optimizer(optimizer_name_, module_->parameters());
  const Metadata meta = nn::load_checkpoint(path, *module_, optimizer_.get());
  auto counter = [&](const char* key) -> int64_t {
    const auto it = meta.find(key);
    return it == meta.end() ? 0 : std::stoll(it->second);
  };
  iterations_ = counter("checkpoint.iterations");
  epoch_ = static_cast<int>(counter("checkpoint.epoch"));
}

}  // namespace encore::nn
