// The main job: the same training step run eagerly and traced, on the models where the
// difference is instructive, in one table.
//
//   models   small       Conv1D(128, 40, strides 4, same) -> GAP -> Dropout -> Dense(64) -> Dense(1)
//                        batch (32, 140, 30): kernel-dominated
//            tiny_dense  Dense(32, relu) per step -> GAP -> Dense(1), batch (32, 4, 8):
//                        overhead-dominated
//            lstm        Bidirectional(LSTM(units)) -> Dense(1) on (32, length, 16)
//                        (--lstm; the medium model is --lstm-units 512 --lstm-length 400)
//   modes    eager              every op dispatched as it is called
//            eager_new_length   eager, a new sequence length every call (per-shape setup)
//            traced             one trace, then replays
//            traced_new_length  a new length every call: a retrace per call
//            traced_bucket      new lengths, padded to buckets: few traces. A cost demo only:
//                               these models pool (or recur) over the padded steps, so their
//                               results differ from eager (bucketing is exact only for
//                               length-equivariant functions, docs/ARCHITECTURE.md)
//
// Columns: first_call_ms (includes tracing and per-shape setup), step_ms_median (after
// warm-up; for eager and traced, from steps of the two taken in turn), traces, trace_ms_total
// / per trace (trace + plan + capture), autotune_ms, and the kernel time vs framework overhead
// per step (from a profiled pass). --json FILE writes the rows.
//
//   compare_modes [--steps 30] [--device cpu|cuda] [--json out.json] [--only MODEL]
//                 [--lstm [--lstm-units 64] [--lstm-length 50] [--lstm-impl auto|composed|cudnn]]
#include <cstdio>
#include <functional>

#include "common.h"
#include "encore.h"
#include "graph/trace.h"
#include "ops/autotune.h"
#include "ops/conv.h"

using namespace encore;

namespace {

struct Model {
  std::string name;
  Shape input;  // batch, steps, features
  std::function<std::shared_ptr<nn::Sequential>()> build;
  std::vector<int64_t> buckets;
};

std::vector<Model> models(const examples::Args& args) {
  std::vector<Model> m;
  m.push_back({"small", {32, 140, 30}, [] {
                 auto s = std::make_shared<nn::Sequential>();
                 s->add<nn::Conv1D>(128, 40, nn::Conv1DOptions{.strides = 4, .padding = "same"});
                 s->add<nn::GlobalAveragePooling1D>();
                 s->add<nn::Dropout>(0.5);
                 s->add<nn::Dense>(64, nn::DenseOptions{.activation = "relu"});
                 s->add<nn::Dense>(1, nn::DenseOptions{.activation = "sigmoid"});
                 return s;
               }, {160, 192, 224}});
  m.push_back({"tiny_dense", {32, 4, 8}, [] {
                 auto s = std::make_shared<nn::Sequential>();
                 s->add<nn::Dense>(32, nn::DenseOptions{.activation = "relu"});
                 s->add<nn::GlobalAveragePooling1D>();
                 s->add<nn::Dense>(1, nn::DenseOptions{.activation = "sigmoid"});
                 return s;
               }, {16, 32, 64}});
  if (args.flag("lstm")) {
    const int64_t units = args.num("lstm-units", 64), length = args.num("lstm-length", 50);
    const std::string impl = args.get("lstm-impl", "auto");
    const nn::LSTMImplementation which = impl == "composed" ? nn::LSTMImplementation::Composed
                                         : impl == "cudnn"  ? nn::LSTMImplementation::Cudnn
                                                            : nn::LSTMImplementation::Auto;
    m.push_back({"lstm", {32, length, 16}, [units, which] {
                   auto s = std::make_shared<nn::Sequential>();
                   s->add(std::make_shared<nn::Bidirectional>(
                       std::make_shared<nn::LSTM>(units, nn::LSTMOptions{.implementation = which})));
                   s->add<nn::Dense>(1, nn::DenseOptions{.activation = "sigmoid"});
                   return s;
                 }, {length + 16, length + 32, length + 64}});
  }
  if (args.flag("only")) std::erase_if(m, [&](const Model& x) { return x.name != args.get("only"); });
  return m;
}

enum class Mode { Eager, EagerNewLength, Traced, TracedNewLength, TracedBucket };
const char* mode_name(Mode m) {
  static const char* names[] = {"eager", "eager_new_length", "traced", "traced_new_length", "traced_bucket"};
  return names[static_cast<int>(m)];
}

struct Batch {
  Tensor x, y;
};

Batch batch(const Shape& s, int64_t length, uint64_t seed, Device device) {
  Generator g(seed);
  Tensor x = normal({s[0], length, s[2]}, 0.0, 1.0, DType::Float32, Device::cpu(), &g);
  Tensor y = gt(x.slice(1, 0, 1).slice(2, 0, 1).reshape({s[0], 1}), 0.0);
  return {x.to(device), y.to(device)};
}

struct Result {
  double first_ms = 0, step_ms = 0, kernel_ms = 0, overhead_ms = 0, trace_ms = 0, autotune_ms = 0, capture_ms = 0;
  int64_t traces = 0, ops_per_step = 0;
  std::string last_reason;
};

// One mode's training setup: a fresh model and optimizer from the same seed, its step
// (eager or traced), and its batches. Creating one clears the per-shape caches: every mode
// starts cold, and per-shape setup is part of what its first call costs.
class Runner {
 public:
  Runner(const Model& model, Mode mode, Device device) : model_(model), mode_(mode), device_(device) {
    clear_conv1d_primitives();
    autotune::clear();
    manual_seed(0);
    net_ = model.build();
    net_->build(model.input);
    net_->to(device);
    adam_ = std::make_unique<nn::Adam>(net_->parameters(), 1e-3);
    TraceOptions options{.name = model.name + "_" + mode_name(mode), .retrace_warning = 0, .arg_names = {"x", "y"}};
    if (mode == Mode::TracedBucket) options.shapes = ShapePolicy::bucket(1, model.buckets);
    traced_ = std::make_unique<Traced<Step>>(Step([this](const Tensor& x, const Tensor& y) { return step(x, y); }), options);
    for (int i = 0; i < 4; ++i) fixed_.push_back(batch(model.input, model.input[1], 10 + i, device));
  }
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  bool new_lengths() const { return mode_ == Mode::EagerNewLength || mode_ == Mode::TracedNewLength || mode_ == Mode::TracedBucket; }

  /// Call `i`, timed in ms: fixed-shape modes cycle over four batches, new-length modes use
  /// length base + 1 + i.
  double call(int i) {
    const Batch b = new_lengths() ? batch(model_.input, model_.input[1] + 1 + i, 100 + i, device_) : fixed_[i % 4];
    synchronize(device_);
    const auto t0 = std::chrono::steady_clock::now();
    mode_ == Mode::Eager || mode_ == Mode::EagerNewLength ? step(b.x, b.y) : (*traced_)(b.x, b.y);
    synchronize(device_);
    return examples::seconds_since(t0) * 1e3;
  }

  const TraceStats& stats() const { return traced_->stats(); }

 private:
  using Step = std::function<Tensor(const Tensor&, const Tensor&)>;
  Tensor step(const Tensor& x, const Tensor& y) {
    adam_->zero_grad();
    Tensor loss = nn::binary_crossentropy(y, (*net_)(x));
    loss.backward();
    adam_->step();
    return loss;
  }

  Model model_;
  Mode mode_;
  Device device_;
  std::shared_ptr<nn::Sequential> net_;
  std::unique_ptr<nn::Adam> adam_;
  std::unique_ptr<Traced<Step>> traced_;
  std::vector<Batch> fixed_;
};

Result measure(Runner& runner, int steps) {
  Ledger& ledger = Ledger::global();
  const int64_t tune0 = ledger.get(Counter::AutotuneNs);
  Result r;
  std::vector<double> ms;
  const int warmup = runner.new_lengths() ? 0 : 3;
  for (int i = 0; i < steps + warmup; ++i) {
    const int64_t ops0 = ledger.get(Counter::OpsDispatched);
    const double t = runner.call(i);
    if (i == 0) r.first_ms = t;
    if (i >= warmup && (runner.new_lengths() || i > 0)) ms.push_back(t);
    r.ops_per_step = ledger.get(Counter::OpsDispatched) - ops0;
  }
  r.step_ms = examples::median(ms);
  r.autotune_ms = (ledger.get(Counter::AutotuneNs) - tune0) / 1e6;
  const TraceStats& s = runner.stats();
  r.traces = s.traces;
  for (const TraceRecord& rec : s.records) {
    r.trace_ms += rec.total_ns() / 1e6;
    r.capture_ms += (rec.capture_ns + rec.instantiate_ns) / 1e6;
  }
  if (!s.records.empty()) r.last_reason = s.records.back().reason;
  // Kernel time vs the rest, from a profiled pass over the same work (fixed shape): both
  // measured in that pass, so the timers' own cost lands on both sides alike.
  if (!runner.new_lengths()) {
    const int64_t k0 = ledger.get(Counter::KernelNs);
    ledger.set_profiling(true);
    const int profiled = 10;
    double profiled_ms = 0;
    for (int i = 0; i < profiled; ++i) profiled_ms += runner.call(i);
    ledger.set_profiling(false);
    r.kernel_ms = (ledger.get(Counter::KernelNs) - k0) / 1e6 / profiled;
    r.overhead_ms = profiled_ms / profiled - r.kernel_ms;
  }
  return r;
}

// Eager and traced steps taken in turn: whatever the machine does meanwhile (other tenants,
// clock changes) hits both alike, so their ratio holds even where absolute times drift.
std::pair<double, double> paired_medians(Runner& eager, Runner& traced, int steps) {
  std::vector<double> e, t;
  for (int i = 0; i < steps + 2; ++i) {
    const double te = eager.call(i), tt = traced.call(i);
    if (i >= 2) e.push_back(te), t.push_back(tt);  // the first pairs redo eager's cleared setup
  }
  return {examples::median(e), examples::median(t)};
}

}  // namespace

int main(int argc, char** argv) {
  const examples::Args args(argc, argv);
  const Device device = examples::pick_device(args);
  const int steps = static_cast<int>(args.num("steps", 30));
  std::printf("encore compare_modes on %s (flush denormals %s, tf32 %s), %d measured steps per mode\n\n",
              device.str().c_str(), flush_denormal() ? "on" : "off", allow_tf32() ? "on" : "off", steps);
  // Process start-up (thread pools, library initialization and code generation, first page
  // faults) belongs to no mode: one eager step of each model on another shape pays it, and
  // leaves no per-shape state behind for the modes (each clears it).
  const auto warm_start = std::chrono::steady_clock::now();
  for (Model model : models(args)) {
    model.input = {model.input[0] / 2, model.input[1] + 3, model.input[2]};
    Runner warm(model, Mode::Eager, device);
    (void)warm.call(0);
  }
  const double warm_ms = examples::seconds_since(warm_start) * 1e3;
  std::vector<examples::Row> rows;
  std::vector<std::string> notes;
  for (const Model& model : models(args)) {
    std::vector<std::pair<Mode, Result>> results;
    std::unique_ptr<Runner> eager, traced;  // kept for the paired measurement
    for (Mode mode : {Mode::Eager, Mode::EagerNewLength, Mode::Traced, Mode::TracedNewLength, Mode::TracedBucket}) {
      const bool fixed = mode == Mode::Eager || mode == Mode::Traced;
      auto runner = std::make_unique<Runner>(model, mode, device);
      results.emplace_back(mode, measure(*runner, fixed ? steps : std::max(steps / 2, 5)));
      if (mode == Mode::Eager) eager = std::move(runner);
      if (mode == Mode::Traced) traced = std::move(runner);
    }
    // The fixed-shape medians come from eager and traced steps taken in turn.
    const auto [eager_ms, traced_ms] = paired_medians(*eager, *traced, steps);
    for (auto& [mode, r] : results) {
      if (mode == Mode::Eager) r.step_ms = eager_ms;
      if (mode == Mode::Traced) r.step_ms = traced_ms;
      const bool fixed = mode == Mode::Eager || mode == Mode::Traced;
      examples::Row row;
      row.add("model", model.name)
          .add("mode", mode_name(mode))
          .add("device", device.str())
          .add("first_call_ms", r.first_ms)
          .add("step_ms_median", r.step_ms)
          .add("traces", r.traces)
          .add("trace_ms_total", r.trace_ms)
          .add("trace_ms_each", r.traces ? r.trace_ms / r.traces : 0.0)
          .add("capture_ms_total", r.capture_ms)
          .add("autotune_ms", r.autotune_ms)
          .add("kernel_ms_per_step", fixed ? r.kernel_ms : NAN)
          .add("overhead_ms_per_step", fixed ? r.overhead_ms : NAN)
          .add("speedup_vs_eager", eager_ms / r.step_ms);
      rows.push_back(row);
      if (mode == Mode::Eager)
        notes.push_back(detail::cat(model.name, ": eager dispatches ", r.ops_per_step, " ops per step"));
      if (mode == Mode::TracedNewLength) notes.push_back(model.name + " retrace reason: " + r.last_reason);
    }
  }
  examples::print_table(rows);
  std::printf("\n");
  for (const std::string& n : notes) std::printf("%s\n", n.c_str());
  std::printf("process warm-up before the first mode (not in any row): %.1f ms\n", warm_ms);
  if (args.flag("json")) examples::write_json(args.get("json"), rows);
  return 0;
}
