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

constexpr const char* kOptimizers[] = {"sgd", "adam", "adamw", "rmsprop"};

std::shared_ptr<Optimizer> make_optimizer(const std::string& name, std::vector<Tensor> params) {
  if (name == "sgd") return std::make_shared<SGD>(std::move(params));
  if (name == "adam") return std::make_shared<Adam>(std::move(params));
  if (name == "adamw") return std::make_shared<AdamW>(std::move(params));
  if (name == "rmsprop") return std::make_shared<RMSprop>(std::move(params));
  throw ValueError("[compile] unknown optimizer '" + name +
                   "': use sgd, adam, adamw, rmsprop or an optimizer");
}

}  // namespace

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
      m.fn = metric_by_name(m.name, loss);
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
