#include "train/compare.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>

#include "core/ledger.h"
#include "core/modes.h"
#include "ops/autotune.h"
#include "ops/ops.h"
#include "ops/prepared.h"

namespace encore {

BatchSource BatchSource::of(std::function<Batch(int64_t)> make, int64_t length) {
  ENCORE_CHECK(make, ValueError, "[compare_modes] the batch source has no function");
  BatchSource s;
  s.batches.push_back(make(length));
  s.make = std::move(make);
  return s;
}

const ModeReport& CompareReport::operator[](const std::string& mode) const {
  for (const ModeReport& m : modes)
    if (m.mode == mode) return m;
  throw ValueError("[compare_modes] the report has no mode '" + mode + "'");
}

namespace {

// The ledger's communication counters around one step (core/dist.h), added to a mode's means.
struct CommMark {
  int64_t calls, bytes, comm_ns, wait_ns;
  explicit CommMark(const Ledger& l)
      : calls(l.get(Counter::Collectives)),
        bytes(l.get(Counter::CollectiveBytes)),
        comm_ns(l.get(Counter::CommNs)),
        wait_ns(l.get(Counter::CommWaitNs)) {}
  void add_to(ModeReport& r, const Ledger& l, int steps) const {
    const double n = steps;
    const int64_t comm = l.get(Counter::CommNs) - comm_ns,
                  wait = l.get(Counter::CommWaitNs) - wait_ns;
    r.comm_calls += (l.get(Counter::Collectives) - calls) / n;
    r.comm_bytes += (l.get(Counter::CollectiveBytes) - bytes) / n;
    r.comm_ms += comm / 1e6 / n;
    r.comm_hidden_ms += std::max<int64_t>(0, comm - wait) / 1e6 / n;
  }
};

}  // namespace

namespace {

const std::vector<std::string>& known_modes() {
  static const std::vector<std::string> m = {
      "eager",  "traced",        "eager_new_length", "traced_new_length",
      "bucket", "predict_eager", "predict_traced"};
  return m;
}

std::string baseline_of(const std::string& mode) {
  if (mode == "traced") return "eager";
  if (mode == "traced_new_length" || mode == "bucket") return "eager_new_length";
  if (mode == "predict_traced") return "predict_eager";
  return "";
}

double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

Device device_of(const Batch& b) {
  for (const Tensor& t : b)
    if (t.defined()) return t.device();
  return Device::cpu();
}

// Each mode's own per-shape state (the dispatcher's kernel states and RNN setups, the autotune
// store): a mode starts without any and never finds a shape another mode set up, as if it ran
// alone, while the modes still take their steps in turn. The caller's state is put back
// afterwards, also when the comparison fails.
class PerModeState {
 public:
  explicit PerModeState(size_t modes) : states_(modes), caller_(swap_per_shape_state()) {}
  ~PerModeState() { swap_per_shape_state(std::move(caller_)); }
  PerModeState(const PerModeState&) = delete;
  PerModeState& operator=(const PerModeState&) = delete;

  /// Installs mode k's state, keeping the one in place for its mode.
  void enter(size_t k) {
    if (current_ == k) return;
    PerShapeState left = swap_per_shape_state(std::move(states_[k]));
    if (current_ < states_.size()) states_[current_] = std::move(left);
    current_ = k;
  }

 private:
  std::vector<PerShapeState> states_;
  PerShapeState caller_;
  size_t current_ = SIZE_MAX;  // none: the state process start-up ran in, dropped
};

// One mode: how it calls the step, and on which batches.
class Runner {
 public:
  Runner(std::string mode, const Step& step, const Step& predict, const BatchSource& data,
         const CompareOptions& o)
      : mode_(std::move(mode)), data_(data), options_(o) {
    const bool forward = mode_.starts_with("predict");
    const Step& fn = forward ? predict : step;
    ENCORE_CHECK(fn, ValueError, "[compare_modes] mode '", mode_,
                 "' needs a predict function (or the model form)");
    variable_ = mode_.ends_with("new_length") || mode_ == "bucket";
    ENCORE_CHECK(!variable_ || data.make, ValueError, "[compare_modes] mode '", mode_,
                 "' needs a batch source that makes a batch of a given length");
    ENCORE_CHECK(!variable_ || !o.length_args.empty(), ValueError, "[compare_modes] mode '", mode_,
                 "' needs length_args (which batch tensors have the varying length)");
    if (mode_ == "eager" || mode_ == "eager_new_length" || mode_ == "predict_eager") {
      eager_ = fn;
      return;
    }
    TraceOptions t;
    t.name = o.name + "_" + mode_;
    t.retrace_warning = 0;
    t.arg_names = o.arg_names;
    t.on_warning = o.on_warning;
    t.collect_garbage = o.collect_garbage;
    if (mode_ == "bucket") {
      ENCORE_CHECK(!o.buckets.empty(), ValueError,
                   "[compare_modes] mode 'bucket' needs bucket sizes");
      t.shapes = ShapePolicy::bucket(o.length_axis, o.buckets, o.length_args);
    }
    traced_ = std::make_shared<TracedFunction>(
        [fn](const std::vector<Arg>& args) {
          Batch b;
          b.reserve(args.size());
          for (const Arg& a : args) b.push_back(std::get<Tensor>(a));
          return fn(b);
        },
        std::move(t));
  }

  const std::string& mode() const { return mode_; }
  bool traced() const { return traced_ != nullptr; }
  bool variable() const { return variable_; }
  const TracedFunction* function() const { return traced_.get(); }

  /// Call `i` (0-based), timed in ms.
  double call(int64_t i) {
    const Batch batch = variable_ ? data_.make(length(i))
                                  : data_.batches[static_cast<size_t>(i) % data_.batches.size()];
    const Device device = device_of(batch);
    std::unique_ptr<NoGradGuard> no_grad;
    std::unique_ptr<TrainingGuard> inference;
    if (mode_.starts_with("predict")) {
      no_grad = std::make_unique<NoGradGuard>();
      inference = std::make_unique<TrainingGuard>(false);
    }
    synchronize(device);
    const auto t0 = std::chrono::steady_clock::now();
    if (traced_) {
      std::vector<Arg> args(batch.begin(), batch.end());
      (*traced_)(args);
    } else {
      eager_(batch);
    }
    synchronize(device);
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }

 private:
  int64_t length(int64_t i) const {
    if (options_.length) return options_.length(i);
    const Tensor& t = data_.batches.at(0).at(static_cast<size_t>(options_.length_args.at(0)));
    return t.shape()[normalize_axis(options_.length_axis, t.dim(), "compare_modes")] + 1 + i;
  }

  std::string mode_;
  const BatchSource& data_;
  const CompareOptions& options_;
  bool variable_ = false;
  Step eager_;
  std::shared_ptr<TracedFunction> traced_;
};

// Copies of tensors, put back by restore() or, when the comparison fails, on destruction.
class Snapshot {
 public:
  explicit Snapshot(const std::vector<Tensor>& tensors) {
    for (const Tensor& t : tensors)
      if (t.defined()) saved.emplace_back(t, t.detach().clone());
  }
  ~Snapshot() {
    if (restored_) return;
    // Unwinding from a failed comparison: its error is the one to report.
    try {
      restore();
    } catch (...) {
    }
  }
  Snapshot(const Snapshot&) = delete;
  Snapshot& operator=(const Snapshot&) = delete;
  void restore() {
    restored_ = true;
    NoGradGuard no_grad;
    for (const auto& [t, before] : saved) t.detach().copy_(before);
  }

  std::vector<std::pair<Tensor, Tensor>> saved;  // (tensor, its value before)

 private:
  bool restored_ = false;
};

// What a mode's one-off work cost beyond its median: its first call, and every call that traced
// or set up a shape, each less the median. Where most calls did (a new shape every call), that
// work is the mode's cost per call, which the median holds: the first call alone counts.
double one_off_ms(const ModeReport& r, const std::vector<bool>& did_one_off) {
  const size_t n = std::min(r.step_ms.size(), did_one_off.size());
  const bool per_call =
      2 * static_cast<size_t>(std::count(did_one_off.begin(), did_one_off.end(), true)) > n;
  double total = 0;
  for (size_t i = 0; i < n; ++i)
    if (i == 0 || (did_one_off[i] && !per_call)) total += r.step_ms[i] - r.step_ms_median;
  return total;
}

// The call after which t's total (one-off cost + calls x median) is at most e's.
int64_t break_even(const ModeReport& t, const ModeReport& e) {
  if (t.one_off_ms + t.step_ms_median <= e.one_off_ms + e.step_ms_median) return 1;
  const double gain = e.step_ms_median - t.step_ms_median;
  if (!(gain > 0)) return -1;
  return std::max<int64_t>(1,
                           static_cast<int64_t>(std::ceil((t.one_off_ms - e.one_off_ms) / gain)));
}

// The options a comparison can run with, checked before anything runs.
void check_options(const Step& step, const BatchSource& data, const CompareOptions& options) {
  ENCORE_CHECK(step, ValueError, "[compare_modes] no step function");
  ENCORE_CHECK(!data.batches.empty(), ValueError, "[compare_modes] the batch source has no batch");
  ENCORE_CHECK(options.steps >= 1 && options.warmup >= 0 && options.profile_steps >= 0, ValueError,
               "[compare_modes] needs steps >= 1, warmup >= 0, profile_steps >= 0");
  ENCORE_CHECK(!options.modes.empty(), ValueError, "[compare_modes] no modes");
  for (const std::string& m : options.modes) {
    const auto& known = known_modes();
    if (std::find(known.begin(), known.end(), m) != known.end()) continue;
    std::string list;
    for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
    throw ValueError("[compare_modes] unknown mode '" + m + "' (modes: " + list + ")");
  }
  for (size_t i = 0; i < options.length_args.size(); ++i) {
    const int a = options.length_args[i];
    for (const Batch& b : data.batches)
      ENCORE_CHECK(a >= 0 && static_cast<size_t>(a) < b.size(), ValueError,
                   "[compare_modes] length_args[", i, "] = ", a, " is not an index of the batch's ",
                   b.size(), " tensors");
  }
}

// One comparison in its phases: each mode's first call, the timed rounds, the profiled pass,
// the summary. A mode's calls run in its own per-shape state and count for it alone.
class Comparison {
 public:
  Comparison(const Step& step, const BatchSource& data, const CompareOptions& options,
             CompareReport& report)
      : options_(options),
        report_(report),
        failed_(options.modes.size(), false),
        did_one_off_(options.modes.size()) {
    runners_.reserve(options.modes.size());
    for (const std::string& m : options.modes)
      runners_.emplace_back(m, step, options.predict, data, options);
    report_.modes.resize(runners_.size());
    per_mode_.emplace(runners_.size());
  }

  void first_calls() {
    for (size_t k = 0; k < runners_.size(); ++k) {
      ModeReport& r = report_.modes[k];
      r.mode = runners_[k].mode();
      r.baseline = baseline_of(r.mode);
      r.first_call_ms = run(k, 0);
      for (const autotune::Entry& e : autotune::entries())
        r.algorithms.push_back(e.op + ": " + e.algorithm + " (" + e.key + ")");
    }
  }

  // The modes take their steps in turn, so drift on the machine hits them alike, and each round
  // starts from the next mode, so no mode always runs in the memory one before it left.
  void timed_rounds() {
    for (int round = 1; round <= options_.warmup + options_.steps; ++round) {
      for (size_t j = 0; j < runners_.size(); ++j) {
        const size_t k = (j + static_cast<size_t>(round)) % runners_.size();
        if (failed_[k]) continue;
        const int64_t live = ledger_.live_bytes();
        const CommMark comm(ledger_);
        ledger_.reset_peak();
        run(k, round);
        ModeReport& r = report_.modes[k];
        if (failed_[k] || round <= options_.warmup) continue;
        comm.add_to(r, ledger_, options_.steps);
        r.peak_bytes = std::max(r.peak_bytes, ledger_.peak_live_bytes() - live);
      }
    }
  }

  // Kernel time against the rest, and copy-in, from a profiled pass: both measured in that
  // pass, so the timers' own cost lands on both sides alike. Medians over its steps, as for the
  // step times, so that one step the machine interrupted does not move them.
  void profiled_pass() {
    const int64_t next = options_.warmup + options_.steps + 1;
    for (size_t k = 0; k < runners_.size(); ++k) {
      ModeReport& r = report_.modes[k];
      r.kernel_ms = r.overhead_ms = r.copy_in_ms = NAN;
      // Variable-length modes trace or set up per call: kernel time is no measure of them.
      if (failed_[k] || runners_[k].variable() || options_.profile_steps == 0) continue;
      std::vector<double> kernel, overhead, copy_in;
      per_mode_->enter(k);
      ledger_.set_profiling(true);
      try {
        for (int i = 0; i < options_.profile_steps; ++i) {
          const int64_t kernel0 = ledger_.get(Counter::KernelNs),
                        copy0 = ledger_.get(Counter::CopyInNs);
          const double wall = runners_[k].call(next + i);
          kernel.push_back((ledger_.get(Counter::KernelNs) - kernel0) / 1e6);
          overhead.push_back(wall - kernel.back());
          copy_in.push_back((ledger_.get(Counter::CopyInNs) - copy0) / 1e6);
        }
      } catch (...) {
        ledger_.set_profiling(false);
        throw;
      }
      ledger_.set_profiling(false);
      r.kernel_ms = median(kernel);
      r.overhead_ms = median(overhead);
      if (runners_[k].traced()) r.copy_in_ms = median(copy_in);
    }
  }

  // Medians, one-off costs, the traces' records, and each mode against its baseline.
  void summarize() {
    for (size_t k = 0; k < runners_.size(); ++k) {
      ModeReport& r = report_.modes[k];
      r.calls = static_cast<int64_t>(r.step_ms.size());
      if (failed_[k]) continue;
      const std::vector<double> steady(
          r.step_ms.begin() + 1 + std::min<int64_t>(options_.warmup, r.calls - 1), r.step_ms.end());
      r.step_ms_median = median(steady);
      r.one_off_ms = one_off_ms(r, did_one_off_[k]);
      if (const TracedFunction* f = runners_[k].function()) add_trace_stats(r, *f);
    }
    for (ModeReport& r : report_.modes) {
      if (!r.error.empty()) continue;
      if (r.baseline.empty()) r.speedup = 1.0;
      for (const ModeReport& e : report_.modes)
        if (!r.baseline.empty() && e.mode == r.baseline && e.error.empty()) {
          r.break_even_step = break_even(r, e);
          r.speedup = e.step_ms_median / r.step_ms_median;
        }
    }
  }

 private:
  // Call i of mode k in its own per-shape state; its setups and traces count for it. A failed
  // mode (a refused bucket policy) keeps its error and leaves the rounds.
  double run(size_t k, int64_t i) {
    ModeReport& r = report_.modes[k];
    per_mode_->enter(k);
    const int64_t setups0 = ledger_.get(Counter::Autotunes),
                  setup_ns0 = ledger_.get(Counter::AutotuneNs),
                  traces0 = ledger_.get(Counter::Traces);
    double ms = NAN;
    try {
      ms = runners_[k].call(i);
    } catch (const Error& e) {
      if (runners_[k].mode() != "bucket") throw;
      r.error = e.what();
      failed_[k] = true;
    }
    const int64_t setups = ledger_.get(Counter::Autotunes) - setups0,
                  traces = ledger_.get(Counter::Traces) - traces0;
    r.setups += setups;
    r.traces += traces;
    r.setup_ms += (ledger_.get(Counter::AutotuneNs) - setup_ns0) / 1e6;
    did_one_off_[k].push_back(setups > 0 || traces > 0);
    r.step_ms.push_back(ms);
    return ms;
  }

  static void add_trace_stats(ModeReport& r, const TracedFunction& f) {
    const TraceStats& s = f.stats();
    r.records = s.records;
    for (const TraceRecord& rec : s.records) r.trace_ms_total += rec.total_ns() / 1e6;
    if (!s.records.empty()) r.arena_bytes = static_cast<int64_t>(s.records.back().arena_bytes);
    r.axis_values = f.axis_values();
    r.real_elements = s.real_elements;
    r.padding_elements = s.padding_elements;
    r.retraces_saved = s.retraces_saved;
  }

  const CompareOptions& options_;
  CompareReport& report_;
  Ledger& ledger_ = Ledger::global();
  std::vector<Runner> runners_;
  std::optional<PerModeState> per_mode_;  // after the runners: their setup is no mode's
  std::vector<bool> failed_;
  std::vector<std::vector<bool>> did_one_off_;  // per mode and call: traced or set up a shape
};

}  // namespace

CompareReport compare_modes(const Step& step, const BatchSource& data, CompareOptions options) {
  check_options(step, data, options);
  CompareReport report;
  report.name = options.name;
  report.device = device_of(data.batches[0]).str();
  report.steps = options.steps;
  report.trained = options.state.empty();
  Snapshot state(options.state);
  {
    Comparison comparison(step, data, options, report);
    // Process start-up (thread pools, library initialization, first page faults) belongs to no
    // mode: one eager step pays it, in a per-shape state of its own that no mode gets.
    step(data.batches[0]);
    comparison.first_calls();
    comparison.timed_rounds();
    comparison.profiled_pass();
    comparison.summarize();
    state.restore();
  }
  for (const auto& [t, before] : state.saved)
    report.restored.push_back(t.name().empty() ? "unnamed " + describe(t) : t.name());
  return report;
}

CompareReport compare_modes(nn::Module& model, const LossFn& loss, nn::Optimizer& optimizer,
                            const BatchSource& data, CompareOptions options) {
  ENCORE_CHECK(loss, ValueError, "[compare_modes] no loss function");
  ENCORE_CHECK(
      model.built(), ValueError,
      "[compare_modes] build the model first (model.build(input_shape)) and make the optimizer "
      "over its parameters");
  nn::check_covers(optimizer, model, "compare_modes");
  for (const Batch& b : data.batches)
    ENCORE_CHECK(b.size() == 2, ValueError,
                 "[compare_modes] the model form takes batches (x, y), got ", b.size(), " tensors");
  const Step step = [&](const Batch& b) -> std::vector<Tensor> {
    optimizer.zero_grad();
    Tensor l = loss(b[1], model(b[0]));
    l.backward();
    optimizer.step();
    return {l};
  };
  if (!options.predict)
    options.predict = [&](const Batch& b) -> std::vector<Tensor> { return {model(b[0])}; };
  if (options.arg_names.empty()) options.arg_names = {"x", "y"};
  // Parameters and the optimizer state as they are now; slots the optimizer creates during
  // the comparison are zeroed afterwards (a fresh optimizer's state).
  std::vector<Tensor> before = model.parameters();
  const nn::NamedTensors slots_before = optimizer.state();
  for (const auto& [name, t] : slots_before) before.push_back(t);
  options.state = before;
  auto zero_new_slots = [&] {
    NoGradGuard no_grad;
    std::vector<std::string> zeroed;
    for (const auto& [name, t] : optimizer.state()) {
      // state()'s "lr" is a fresh copy of the learning rate, which the comparison does not change.
      if (name == "lr") continue;
      const bool existed = std::any_of(slots_before.begin(), slots_before.end(),
                                       [&](const auto& s) { return s.second.impl() == t.impl(); });
      if (!existed) {
        t.detach().copy_(zeros_like(t));
        zeroed.push_back(name + " (zeroed: created during the comparison)");
      }
    }
    return zeroed;
  };
  CompareReport report;
  try {
    report = compare_modes(step, data, std::move(options));
  } catch (...) {
    zero_new_slots();  // the parameters and the older slots are back already (Snapshot)
    throw;
  }
  for (std::string& s : zero_new_slots()) report.restored.push_back(std::move(s));
  return report;
}

}  // namespace encore
