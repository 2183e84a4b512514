// Model's loops: fit (epochs, steps_per_epoch, validation, callbacks, the data-parallel shard),
// evaluate and predict, their *_on_batch forms, and the cost summary a fit ends with.
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

// The cost summary of a fit, from the ledger and the records of the traced steps `fns`.
std::string cost_summary(const CostMark& mark, int64_t steps, ExecutionMode mode,
                         std::initializer_list<const TracedFunction*> fns) {
  if (mode == ExecutionMode::Eager)
    return detail::cat("cost (eager): ", steps, " training steps, ",
                       mark.since(Counter::OpsDispatched), " ops dispatched in ",
                       ms(mark.since(Counter::DispatchNs)), " (",
                       per(mark.since(Counter::DispatchNs), steps), " per step)");
  std::string traces;
  int64_t n = 0;
  for (const TracedFunction* f : fns) {
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
  return detail::cat("cost (traced): ", n, " traces", n ? " (" + traces + ")" : "", ", ", replays,
                     " replays; tracing ", ms(tracing), ", replaying ", ms(replay_ns), " (",
                     per(replay_ns, replays), " per replay)");
}

}  // namespace

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

// One pass of fit over the data: where it stands across epochs.
struct Model::FitPass {
  Dataset& data;
  const FitOptions& options;
  ProgressBar& bar;
  bool batch_hooks = false;    // a callback wants on_batch_begin / on_batch_end
  bool weights_shared = true;  // false until rank 0's weights reached every rank
  int64_t pass_batches = -1;   // with steps_per_epoch, a pass goes on across epochs
};

History Model::fit(Dataset& all_data, FitOptions options) {
  require_compiled("fit");
  ENCORE_CHECK(options.epochs >= 0 && options.initial_epoch >= 0, ValueError,
               "[fit] epochs and initial_epoch must be >= 0, got ", options.epochs, " and ",
               options.initial_epoch);
  ENCORE_CHECK(options.steps_per_epoch >= 0, ValueError, "[fit] steps_per_epoch must be >= 0, got ",
               options.steps_per_epoch);
  const bool parallel = data_parallel();
  ShardedDataset shard(all_data, dist::rank(), dist::size());
  if (parallel && dist::rank() != 0) options.verbose = 0;
  ProgressBar bar = progress_bar(options.verbose);
  FitPass pass{parallel ? static_cast<Dataset&>(shard) : all_data, options, bar};
  pass.weights_shared = !parallel;
  for (const auto& cb : options.callbacks) {
    ENCORE_CHECK(cb, ValueError, "[fit] a callback is null");
    pass.batch_hooks = pass.batch_hooks || cb->wants_batches();
  }
  const CostMark mark = CostMark::now(
      {train_fn_.get(), test_fn_.get(), weighted_train_fn_.get(), weighted_test_fn_.get()});
  const int64_t steps_before = iterations_;
  const ModeRestore modes(*module_);
  module_->train(true);
  stop_training = false;
  std::vector<std::string> names = log_names();
  if (options.validation_data)
    for (const std::string& n : log_names()) names.push_back("val_" + n);

  History history;
  for (const auto& cb : options.callbacks) cb->on_train_begin(*this);
  for (int epoch = options.initial_epoch; epoch < options.epochs && !stop_training; ++epoch) {
    for (const auto& cb : options.callbacks) cb->on_epoch_begin(*this, epoch);
    bar.start(options.steps_per_epoch ? options.steps_per_epoch : pass.data.size(),
              detail::cat("Epoch ", epoch + 1, "/", options.epochs), names);
    const int64_t batch = train_epoch(pass, epoch, history);
    if (batch == 0 && stop_training) break;  // the data ran out: history.warning says so
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
  // The weighted steps may have been made during the fit.
  history.cost = cost_summary(
      mark, iterations_ - steps_before, options_.mode,
      {train_fn_.get(), test_fn_.get(), weighted_train_fn_.get(), weighted_test_fn_.get()});
  if (options.verbose > 0) {
    if (output_)
      output_(history.cost + "\n");
    else
      std::cout << history.cost << std::endl;
  }
  return history;
}

int64_t Model::train_epoch(FitPass& pass, int epoch, History& history) {
  const FitOptions& options = pass.options;
  const int64_t per_epoch = options.steps_per_epoch;
  if (!per_epoch || pass.pass_batches < 0) {
    pass.data.start(epoch);
    pass.pass_batches = 0;
  }
  int64_t batch = 0;
  while (!stop_training && (!per_epoch || batch < per_epoch)) {
    std::optional<Batch> b = pass.data.next();
    if (!b && per_epoch && pass.pass_batches > 0) {
      pass.data.start(epoch);  // the pass ended: another, as Keras does for data it can read again
      pass.pass_batches = 0;
      b = pass.data.next();
    }
    if (!b) break;
    ++pass.pass_batches;
    ENCORE_CHECK(b->x.defined() && b->y.defined(), ValueError, "[fit] batch ", batch, " has no ",
                 b->x.defined() ? "targets" : "inputs");
    prepare(b->x);
    if (!pass.weights_shared) {  // every rank starts from rank 0's weights
      dist::broadcast_parameters(*module_);
      pass.weights_shared = true;
    }
    if (pass.batch_hooks)
      for (const auto& cb : options.callbacks) cb->on_batch_begin(*this, batch);
    if (batch == 0) reset(train_acc_);
    run_train_step(b->x, b->y, batch_weights(*b, options.class_weight));
    ++batch;
    if (pass.batch_hooks)
      for (const auto& cb : options.callbacks) cb->on_batch_end(*this, batch - 1);
    pass.bar.update(batch, [this] { return running_logs(); });
  }
  if (per_epoch && batch < per_epoch && !stop_training) {
    // Keras: "Your input ran out of data; interrupting training."
    history.warning =
        detail::cat("[fit] the training data ran out after ", batch, " of ", per_epoch,
                    " steps of epoch ", epoch + 1,
                    ": training stops (a one-shot iterable, such "
                    "as a generator, gives steps_per_epoch * epochs batches at most)");
    stop_training = true;
    if (batch == 0) return 0;
  }
  ENCORE_CHECK(batch > 0, ValueError, "[fit] the training data gave no batches in epoch ",
               epoch + 1,
               " (an iterable that can be read only once, such as a generator, gives none after "
               "the first: "
               "pass steps_per_epoch, or an iterable whose __iter__ starts afresh)");
  return batch;
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

}  // namespace encore::nn
