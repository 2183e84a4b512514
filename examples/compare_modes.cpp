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
// warm-up), traces, trace_ms_total / per trace (trace + plan + capture), autotune_ms, and
// the kernel time vs framework overhead per step (from a profiled pass). --json FILE writes
// the rows.
//
//   compare_modes [--steps 30] [--device cpu|cuda] [--json out.json] [--only MODEL]
//                 [--lstm [--lstm-units 64] [--lstm-length 50] [--lstm-impl auto|composed|cudnn]]
#include <cstdio>
#include <functional>

#include "common.h"
#include "encore.h"
#include "graph/trace.h"
#include "ops/autotune.h"
#include "ops/cpu/conv1d.h"

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

Result run(const Model& model, Mode mode, int steps, Device device) {
  // Every mode starts cold: per-shape setup (primitive creation, algorithm search) is part
  // of what the first call costs.
  cpu::clear_conv1d_primitives();
  autotune::clear();
  manual_seed(0);
  auto net = model.build();
  net->build(model.input);
  net->to(device);
  nn::Adam adam(net->parameters(), 1e-3);
  auto step = [&](const Tensor& x, const Tensor& y) {
    adam.zero_grad();
    Tensor loss = nn::binary_crossentropy(y, (*net)(x));
    loss.backward();
    adam.step();
    return loss;
  };
  const bool new_lengths = mode == Mode::EagerNewLength || mode == Mode::TracedNewLength || mode == Mode::TracedBucket;
  TraceOptions options{.name = model.name + "_" + mode_name(mode), .retrace_warning = 0, .arg_names = {"x", "y"}};
  if (mode == Mode::TracedBucket) options.shapes = ShapePolicy::bucket(1, model.buckets);
  auto traced = trace(step, options);
  const bool use_trace = mode == Mode::Traced || mode == Mode::TracedNewLength || mode == Mode::TracedBucket;

  // Fixed-shape modes cycle over a few batches; new-length modes use length base + i.
  const int64_t base = model.input[1];
  std::vector<Batch> fixed;
  for (int i = 0; i < 4; ++i) fixed.push_back(batch(model.input, base, 10 + i, device));
  auto data = [&](int i) { return new_lengths ? batch(model.input, base + 1 + i, 100 + i, device) : fixed[i % 4]; };

  Ledger& ledger = Ledger::global();
  const int64_t tune0 = ledger.get(Counter::AutotuneNs);
  Result r;
  std::vector<double> ms;
  const int warmup = new_lengths ? 0 : 3;
  for (int i = 0; i < steps + warmup; ++i) {
    const Batch b = data(i);
    synchronize(device);
    const int64_t ops0 = ledger.get(Counter::OpsDispatched);
    const auto t0 = std::chrono::steady_clock::now();
    use_trace ? traced(b.x, b.y) : step(b.x, b.y);
    synchronize(device);
    const double t = examples::seconds_since(t0) * 1e3;
    if (i == 0) r.first_ms = t;
    if (i >= warmup && (new_lengths || i > 0)) ms.push_back(t);
    r.ops_per_step = ledger.get(Counter::OpsDispatched) - ops0;
  }
  r.step_ms = examples::median(ms);
  r.autotune_ms = (ledger.get(Counter::AutotuneNs) - tune0) / 1e6;
  const TraceStats& s = traced.stats();
  r.traces = s.traces;
  for (const TraceRecord& rec : s.records) {
    r.trace_ms += rec.total_ns() / 1e6;
    r.capture_ms += (rec.capture_ns + rec.instantiate_ns) / 1e6;
  }
  if (!s.records.empty()) r.last_reason = s.records.back().reason;
  // Kernel time vs the rest, from a profiled pass over the same work (fixed shape): both
  // measured in that pass, so the timers' own cost lands on both sides alike.
  if (!new_lengths) {
    const int64_t k0 = ledger.get(Counter::KernelNs);
    ledger.set_profiling(true);
    const int profiled = 10;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < profiled; ++i) use_trace ? traced(fixed[i % 4].x, fixed[i % 4].y) : step(fixed[i % 4].x, fixed[i % 4].y);
    synchronize(device);
    const double profiled_ms = examples::seconds_since(t0) * 1e3 / profiled;
    ledger.set_profiling(false);
    r.kernel_ms = (ledger.get(Counter::KernelNs) - k0) / 1e6 / profiled;
    r.overhead_ms = profiled_ms - r.kernel_ms;
  }
  return r;
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
    (void)run(model, Mode::Eager, 1, device);
  }
  const double warm_ms = examples::seconds_since(warm_start) * 1e3;
  std::vector<examples::Row> rows;
  std::vector<std::string> notes;
  for (const Model& model : models(args)) {
    double eager_ms = 0;
    for (Mode mode : {Mode::Eager, Mode::EagerNewLength, Mode::Traced, Mode::TracedNewLength, Mode::TracedBucket}) {
      const int n = mode == Mode::Eager || mode == Mode::Traced ? steps : std::max(steps / 2, 5);
      const Result r = run(model, mode, n, device);
      if (mode == Mode::Eager) eager_ms = r.step_ms;
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
