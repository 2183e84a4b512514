// Puzzle 2: the first call per new length is slow. The C++ twin of
// examples/puzzles/p2_first_call.py; docs/puzzles/2-first-call.md explains a run.
//
// A training step of Conv1D(filters, kernel, causal) -> Dense(1, sigmoid) per step (its loss on
// the first 8 steps, so padding the length is exact) over (batch, L, channels), L = L0 ...
// L0 + lengths - 1, two passes, under the exhaustive autotune policy. Scenarios: eager (every
// new length searches), traced_exact (a retrace per length), bucketed (a few traces, then
// replays), second_process (a child process loads the choices the eager scenario saved and
// searches nothing). Per pass: time, and from the ledger searches, reused choices, search time
// and traces.
//
//   puzzle_first_call [--full] [--lengths 10] [--length0 2000] [--batch 4] [--channels 64]
//                     [--filters 32] [--kernel 10] [--threads N] [--device cpu|cuda] [--json F]
#include <cstdio>
#include <sstream>

#include <unistd.h>

#include "../common.h"
#include "core/ledger.h"
#include "encore.h"
#include "ops/autotune.h"
#include "ops/conv.h"
#include "puzzle_cli.h"

using namespace encore;

namespace {

constexpr int64_t kLabeledSteps = 8;

struct Sizes {
  int64_t lengths, length0, batch, channels, filters, kernel;
};

struct Call {
  int pass;
  int64_t length;
  double ms;
  int64_t autotunes, hits, traces;
  double autotune_ms;
};

using StepFn = std::function<void(const Tensor&, const Tensor&)>;

// A fresh model and optimizer; the step runs eagerly, or through `traced` when given options.
StepFn make_step(const Sizes& s, Device device, std::optional<TraceOptions> traced) {
  auto model = std::make_shared<nn::Sequential>();
  model->add<nn::Conv1D>(s.filters, s.kernel, nn::Conv1DOptions{.padding = "causal"});
  model->add<nn::Dense>(1, nn::DenseOptions{.activation = "sigmoid"});
  model->build({s.batch, s.length0, s.channels});
  model->to(device);
  auto sgd = std::make_shared<nn::SGD>(model->parameters(), 1e-4);
  const int64_t n = s.batch;
  auto step = [model, sgd, n](const Tensor& x, const Tensor& y) {
    sgd->zero_grad();
    Tensor p = (*model)(x).slice(1, 0, kLabeledSteps).reshape({n, kLabeledSteps});
    Tensor loss = nn::binary_crossentropy(y, p);
    loss.backward();
    sgd->step();
    return loss;
  };
  if (!traced) return [step](const Tensor& x, const Tensor& y) { step(x, y); };
  auto fn = std::make_shared<TracedFunction>(
      [step](const std::vector<graph::Arg>& a) {
        return std::vector<Tensor>{step(std::get<Tensor>(a[0]), std::get<Tensor>(a[1]))};
      },
      *traced);
  return [fn](const Tensor& x, const Tensor& y) { (*fn)({x, y}); };
}

std::vector<Call> run_passes(const Sizes& s, Device device, const StepFn& step) {
  std::map<int64_t, std::pair<Tensor, Tensor>> data;
  for (int64_t l = s.length0; l < s.length0 + s.lengths; ++l) {
    Generator g(static_cast<uint64_t>(l));
    const Tensor x = normal({s.batch, l, s.channels}, 0.0, 1.0, DType::Float32, Device::cpu(), &g);
    const Tensor y =
        gt(x.slice(1, 0, kLabeledSteps).slice(2, 0, 1).reshape({s.batch, kLabeledSteps}), 0.0)
            .to(DType::Float32);
    data[l] = {x.to(device), y.to(device)};
  }
  Ledger& ledger = Ledger::global();
  std::vector<Call> calls;
  for (int pass = 1; pass <= 2; ++pass) {
    for (const auto& [l, xy] : data) {
      const int64_t a0 = ledger.get(Counter::Autotunes), h0 = ledger.get(Counter::AutotuneHits),
                    t0 = ledger.get(Counter::Traces), ns0 = ledger.get(Counter::AutotuneNs);
      const auto start = std::chrono::steady_clock::now();
      step(xy.first, xy.second);
      synchronize(device);
      calls.push_back({pass, l, examples::seconds_since(start) * 1e3,
                       ledger.get(Counter::Autotunes) - a0, ledger.get(Counter::AutotuneHits) - h0,
                       ledger.get(Counter::Traces) - t0,
                       (ledger.get(Counter::AutotuneNs) - ns0) / 1e6});
    }
  }
  return calls;
}

void fresh() {
  autotune::clear();
  clear_conv1d_primitives();
}

void add_rows(std::vector<examples::Row>& rows, const std::string& scenario,
              const std::vector<Call>& calls) {
  for (int pass = 1; pass <= 2; ++pass) {
    double total = 0, first = -1, tune_ms = 0;
    int64_t tunes = 0, hits = 0, traces = 0;
    std::vector<double> ms;
    for (const Call& c : calls) {
      if (c.pass != pass) continue;
      if (first < 0) first = c.ms;
      total += c.ms;
      ms.push_back(c.ms);
      tunes += c.autotunes;
      hits += c.hits;
      traces += c.traces;
      tune_ms += c.autotune_ms;
    }
    rows.push_back(examples::Row()
                       .add("scenario", scenario)
                       .add("pass", static_cast<int64_t>(pass))
                       .add("total_ms", total)
                       .add("first_ms", first)
                       .add("median_ms", examples::median(ms))
                       .add("autotunes", tunes)
                       .add("autotune_hits", hits)
                       .add("autotune_ms", tune_ms)
                       .add("traces", traces));
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> known = examples::kPuzzleOptions;
  known.insert(known.end(), {"full", "lengths", "length0", "batch", "channels", "filters", "kernel",
                             "child", "child-out"});
  const examples::Args args(argc, argv, known);
  const Device device = examples::puzzle_device(args);
  const bool full = args.flag("full");
  const Sizes s{args.num("lengths", full ? 30 : 10),  args.num("length0", full ? 10000 : 2000),
                args.num("batch", full ? 10 : 4),     args.num("channels", full ? 200 : 64),
                args.num("filters", full ? 100 : 32), args.num("kernel", 10)};
  return examples::guarded(args, [&] {
    autotune::set_policy(autotune::Policy::Exhaustive);
    if (args.flag("child")) {  // the second process: load the saved choices, run the eager passes
      autotune::load(args.get("child"));
      std::ofstream out(args.get("child-out"));
      for (const Call& c : run_passes(s, device, make_step(s, device, std::nullopt)))
        out << c.pass << ' ' << c.length << ' ' << c.ms << ' ' << c.autotunes << ' ' << c.hits
            << ' ' << c.traces << ' ' << c.autotune_ms << '\n';
      return 0;
    }
    std::vector<examples::Row> rows;
    const std::string saved = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") +
                              "/puzzle_first_call_" + std::to_string(getpid()) + ".txt";
    const std::string child_out = saved + ".calls";
    fresh();
    add_rows(rows, "eager", run_passes(s, device, make_step(s, device, std::nullopt)));
    autotune::save(saved);
    fresh();
    add_rows(rows, "traced_exact",
             run_passes(s, device,
                        make_step(s, device, TraceOptions{.name = "step", .retrace_warning = 0})));
    fresh();
    std::vector<int64_t> sizes;
    for (int i = 1; i <= 3; ++i)
      if (sizes.empty() || sizes.back() != s.length0 + s.lengths * i / 3)
        sizes.push_back(s.length0 + s.lengths * i / 3);
    add_rows(rows, "bucketed",
             run_passes(s, device,
                        make_step(s, device,
                                  TraceOptions{.name = "step",
                                               .shapes = ShapePolicy::bucket(1, sizes, {0})})));
    std::ostringstream cmd;
    cmd << argv[0] << " --child " << saved << " --child-out " << child_out << " --lengths "
        << s.lengths << " --length0 " << s.length0 << " --batch " << s.batch << " --channels "
        << s.channels << " --filters " << s.filters << " --kernel " << s.kernel << " --threads "
        << num_threads() << " --device " << device.str();
    ENCORE_CHECK(std::system(cmd.str().c_str()) == 0, BackendError,
                 "[puzzle_first_call] the second process failed: ", cmd.str());
    std::vector<Call> child;
    std::ifstream in(child_out);
    for (Call c{};
         in >> c.pass >> c.length >> c.ms >> c.autotunes >> c.hits >> c.traces >> c.autotune_ms;)
      child.push_back(c);
    std::remove(saved.c_str());
    std::remove(child_out.c_str());
    add_rows(rows, "second_process", child);
    autotune::set_policy(autotune::Policy::Heuristic);
    std::printf(
        "puzzle 2 on %s: a training step of Conv1D(%lld, %lld) over (%lld, L, %lld), L = %lld ... "
        "%lld, two "
        "passes, autotune exhaustive\n",
        device.str().c_str(), static_cast<long long>(s.filters), static_cast<long long>(s.kernel),
        static_cast<long long>(s.batch), static_cast<long long>(s.channels),
        static_cast<long long>(s.length0), static_cast<long long>(s.length0 + s.lengths - 1));
    examples::print_table(rows);
    if (args.flag("json")) examples::write_json(args.get("json"), rows);
    return 0;
  });
}
