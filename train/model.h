// Keras-style training of a Module: compile, then fit / evaluate / predict (and their
// *_on_batch forms). The Python API (Module.compile, .fit, ...) is a thin layer over this class.
//
//   nn::Model model(net);
//   model.compile("adam", "binary_crossentropy", {.metrics = {"accuracy"}});
//   nn::History h = model.fit(x, y, {.batch_size = 32, .epochs = 5, .validation_split = 0.2});
//   nn::Logs test = model.evaluate(x_test, y_test);
//   Tensor p = model.predict(x_new);
//
// Semantics:
//  - Mode "traced" (default): each step (train, test, predict) is a traced function (graph/trace.h)
//    replayed per batch: forward, loss, backward, optimizer update and the running loss and
//    metrics, which accumulate on the device and are read only when shown. "eager" runs the same
//    code op by op. Both give the same bits.
//  - fit trains with the module in training mode (Module::train) and gives it back its modes
//    after; evaluate and predict always run in inference mode, without autograd.
//  - The last batch of a pass is smaller when the rows do not divide evenly: it is kept (every
//    row counts, as in Keras), and being a signature of its own it traces once, in the first
//    epoch, and replays in the next ones. A data set whose batches vary in length can use a
//    bucket shape policy (CompileOptions::shapes).
//  - Loss and metric values per epoch are means over the rows (batches weighted by size).
//  - The learning-rate schedule, early stopping and checkpoints are callbacks (train/callbacks.h).
//  - At the end of fit, with verbose > 0, one line gives the cost from the ledger: traces and why,
//    replays, time tracing vs replaying (eager: ops dispatched and their time).
//  - Data-parallel (compiled with a dist::DistributedOptimizer, launched on several ranks, see
//    nn/distributed.h): fit starts from rank 0's weights, every rank trains on its rows of each
//    batch (ShardedDataset), epoch logs, validation, evaluate and metrics are means over all the
//    ranks' rows (as one process on the whole batch), progress and the cost line show on rank 0
//    only, and save_checkpoint writes on rank 0 only.
#pragma once

#include <concepts>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "graph/trace.h"
#include "nn/data.h"
#include "nn/module.h"
#include "nn/optim.h"
#include "train/callbacks.h"
#include "train/progress.h"

namespace encore::nn {

using LossFn = std::function<Tensor(const Tensor& y_true, const Tensor& y_pred)>;

/// A loss: a Keras name — "binary_crossentropy", "sparse_categorical_crossentropy" (both of
/// probabilities, as Keras' names mean), "mean_squared_error" / "mse", "mean_absolute_error" /
/// "mae" — or any function of (y_true, y_pred) that returns a scalar.
struct Loss {
  Loss(const char* name) : Loss(std::string(name)) {}
  Loss(const std::string& name);
  Loss(std::string name, LossFn fn, bool from_logits = false);
  static Loss binary_crossentropy(bool from_logits = false);
  static Loss sparse_categorical_crossentropy(bool from_logits = false);

  std::string name;
  LossFn fn;
  bool from_logits = false;  // what "accuracy" compares against
};

/// A metric: a name — "accuracy" / "acc" (binary or sparse categorical, after the loss),
/// "binary_accuracy", "sparse_categorical_accuracy", "mse", "mae" and their long names, "auc",
/// "precision", "recall" — or any function of (y_true, y_pred) giving a per-batch mean. Epoch
/// values of mean metrics weight batches by size; AUC, precision and recall are computed from
/// counts over the whole pass, as Keras' (not means of per-batch values).
struct Metric {
  Metric(const char* name) : Metric(std::string(name)) {}
  Metric(std::string name) : name(std::move(name)) {}
  Metric(std::string name, LossFn fn) : name(std::move(name)), fn(std::move(fn)) {}
  /// Keras' AUC (ROC, interpolated Riemann sum) of binary targets and probabilities, from true and
  /// false positive counts at `num_thresholds` thresholds: 0 - 1e-7, i / (n - 1) for 0 < i < n - 1,
  /// 1 + 1e-7.
  static Metric auc(int num_thresholds = 200, std::string name = "auc");
  /// Keras' Precision and Recall: y_pred > threshold counts as positive, targets are 0 or 1.
  static Metric precision(double threshold = 0.5, std::string name = "precision");
  static Metric recall(double threshold = 0.5, std::string name = "recall");

  std::string name;
  LossFn fn;  // a per-batch mean; empty: resolved from the name by compile (or counts below)
  /// A metric of counts: `counts(y_true, y_pred)` gives `width` float64 counts, summed over the
  /// pass; `result` the value from the sums.
  LossFn counts;
  int64_t width = 0;
  std::function<double(const std::vector<double>& sums)> result;
};

/// The function of the metric `name` (those listed at Metric) for a model trained with `loss`:
/// "accuracy" follows the loss (binary or sparse categorical).
LossFn metric_by_name(const std::string& name, const Loss& loss);

/// An optimizer, or the name of one made over the module's parameters, with its defaults, once
/// the module is built: "sgd", "adam", "adamw", "rmsprop".
struct OptimizerSpec {
  template <std::derived_from<Optimizer> O>
  OptimizerSpec(std::shared_ptr<O> optimizer) : optimizer(std::move(optimizer)) {}
  OptimizerSpec(const char* name) : name(name) {}
  OptimizerSpec(std::string name) : name(std::move(name)) {}
  std::shared_ptr<Optimizer> optimizer;
  std::string name;
};

enum class ExecutionMode { Traced, Eager };

struct CompileOptions {
  std::vector<Metric> metrics = {};
  ExecutionMode mode = ExecutionMode::Traced;
  /// The shape policy of the traced steps (graph/trace.h ShapePolicy).
  ShapePolicy shapes = ShapePolicy::exact();
};

struct FitOptions {
  int64_t batch_size = 32;
  int epochs = 1;
  /// The epoch to start at (to resume: Model::epoch() after load_checkpoint).
  int initial_epoch = 0;
  bool shuffle = true;
  /// Seeds the shuffle: the order of epoch e depends only on (seed, e).
  uint64_t seed = 0;
  /// The last fraction of the rows (taken before shuffling) validates instead of training.
  double validation_split = 0.0;
  /// Validation batches (instead of validation_split).
  std::shared_ptr<Dataset> validation_data = nullptr;
  /// Keras' class_weight: the loss weight of each row is that of its class (a row's label:
  /// integer, rounded float, or the argmax of a one-hot row), 1 for classes not listed. Applied
  /// to rows without a sample weight of their own.
  std::map<int64_t, double> class_weight = {};
  /// Keras' sample_weight for fit(x, y): one loss weight per row of x.
  Tensor sample_weight = {};
  /// Batches per epoch (Keras' steps_per_epoch), taken from one pass over the data that goes on
  /// across epochs; a pass that ends starts another. Data that gives no batch when started again
  /// (a one-shot generator) ends training, with History::warning. 0: one whole pass per epoch.
  int64_t steps_per_epoch = 0;
  std::vector<std::shared_ptr<Callback>> callbacks = {};
  /// 0 silent, 1 progress bar, 2 one line per epoch; the cost summary with 1 and 2.
  int verbose = 1;
};

struct History {
  std::vector<int> epoch;
  /// Per logged name ("loss", "val_loss", ...), one value per epoch.
  std::map<std::string, std::vector<double>> history;
  /// The fit's cost summary line.
  std::string cost;
  /// Set when fit stopped early because the data ran out (steps_per_epoch); empty otherwise.
  std::string warning;
};

class Model {
 public:
  explicit Model(std::shared_ptr<Module> module);
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  /// Sets the optimizer, loss and options. Compiling again drops the traced steps.
  void compile(OptimizerSpec optimizer, Loss loss, CompileOptions options = {});
  /// Where progress bars and the cost summary go (default: stdout), and whether bars are redrawn
  /// in place (default: when standard output is a terminal).
  void set_output(std::function<void(const std::string&)> write,
                  std::optional<bool> interactive = {});

  History fit(const Tensor& x, const Tensor& y, FitOptions options = {});
  /// Trains on the batches of `data` (batch_size, shuffle, seed and validation_split unused).
  History fit(Dataset& data, FitOptions options = {});
  /// The loss and metrics over (x, y), in inference mode.
  Logs evaluate(const Tensor& x, const Tensor& y, int64_t batch_size = 32, int verbose = 0,
                const Tensor& sample_weight = {});
  Logs evaluate(Dataset& data, int verbose = 0);
  /// The module's outputs for every row of x, in inference mode without autograd, batched and
  /// concatenated along axis 0 (on the model's device).
  Tensor predict(const Tensor& x, int64_t batch_size = 32, int verbose = 0);
  Tensor predict(Dataset& data, int verbose = 0);

  /// One update on one batch (training mode); the batch's loss and metrics.
  Logs train_on_batch(const Tensor& x, const Tensor& y, const Tensor& sample_weight = {});
  /// The batch's loss and metrics in inference mode.
  Logs test_on_batch(const Tensor& x, const Tensor& y);
  /// The module's output for one batch in inference mode.
  Tensor predict_on_batch(const Tensor& x);

  /// The running loss and metrics of the current pass of fit (means so far; reads the device).
  Logs running_logs() const;
  /// "loss" then the metrics' names.
  std::vector<std::string> log_names() const;

  Module& module() { return *module_; }
  const std::shared_ptr<Module>& module_ptr() const { return module_; }
  bool compiled() const { return compiled_; }
  /// The optimizer (made on first use when compile got a name; null before).
  const std::shared_ptr<Optimizer>& optimizer() const { return optimizer_; }
  ExecutionMode mode() const { return options_.mode; }
  /// Updates done through this model (train steps of fit and train_on_batch); a schedule's step.
  int64_t iterations() const { return iterations_; }
  /// Epochs fit has completed.
  int epoch() const { return epoch_; }
  /// Set by a callback (EarlyStopping) to end fit after the current batch.
  bool stop_training = false;

  /// The traced steps (null in eager mode and before their first use): stats, explain().
  const TracedFunction* train_function() const { return train_fn_.get(); }
  const TracedFunction* test_function() const { return test_fn_.get(); }
  const TracedFunction* predict_function() const { return predict_fn_.get(); }

  /// Everything needed to resume exactly (nn/resume.h) plus iterations() and epoch().
  void save_checkpoint(const std::string& path) const;
  /// Restores a save_checkpoint file, all or nothing; the model must be built (and compiled with
  /// an optimizer of the same kind when the file has optimizer state).
  void load_checkpoint(const std::string& path);

 private:
  // Device sums of the loss and metrics, weighted by batch size, and of the rows seen.
  struct Accumulator {
    Tensor sums, rows;
  };
  void require_compiled(const char* what) const;
  void prepare(const Tensor& x);
  ProgressBar progress_bar(int verbose) const;
  Tensor loss_of(const Tensor& y, const Tensor& pred, const Tensor& w) const;
  Tensor on_device(const Tensor& t) const;
  void run_train_step(const Tensor& x, const Tensor& y, const Tensor& w);
  void train_step(const Tensor& x, const Tensor& y, const Tensor& w);
  void test_step(const Tensor& x, const Tensor& y, const Tensor& w);
  Tensor predict_step(const Tensor& x);
  void accumulate(Accumulator& acc, const Tensor& loss, const Tensor& y, const Tensor& pred);
  Logs read(const Accumulator& acc, const std::string& prefix) const;
  /// Trained through a distributed optimizer in a world of several ranks.
  bool data_parallel() const;
  /// read() over every rank's rows (all-reduced) when data-parallel: all ranks call it together.
  Logs read_all_ranks(const Accumulator& acc) const;
  void reset(Accumulator& acc);
  Logs evaluate_pass(Dataset& data, ProgressBar* bar);
  struct FitPass;
  /// One epoch of fit; returns its batch count.
  int64_t train_epoch(FitPass& pass, int epoch, History& history);

  std::shared_ptr<Module> module_;
  std::shared_ptr<Optimizer> optimizer_;
  std::string optimizer_name_;
  std::optional<Loss> loss_;
  std::vector<Metric> metrics_;
  CompileOptions options_;
  bool compiled_ = false;
  bool optimizer_checked_ = false;  // check_covers passed for the module as built
  std::function<void(const std::string&)> output_;
  std::optional<bool> interactive_;
  Tensor probe_;  // the first parameter: where the model lives
  Device device_;
  Accumulator train_acc_, test_acc_;
  // The traced steps; the weighted ones (sample or class weights) take the weights as a third
  // input and are made on first use.
  std::unique_ptr<TracedFunction> train_fn_, test_fn_, predict_fn_, weighted_train_fn_,
      weighted_test_fn_;
  int64_t iterations_ = 0;
  int epoch_ = 0;
};

}  // namespace encore::nn
