// Puzzle 1: eager vs graph across model and data sizes (the "TF2 is slower than TF1" question).
// The C++ twin of p1_eager_vs_graph.py: the benchmark models (benchmark_models.h) trained with
// encore::compare_modes, eager and traced, steps taken in turn; each eager step split into
// kernel time and framework overhead by the ledger's profiled pass. Graph mode removes the
// overhead, never the kernels: the speedup is bounded by (kernel + overhead) / kernel.
//
//   puzzle_eager_vs_graph                  a subset: a few minutes on 2 cores
//   puzzle_eager_vs_graph --full           every model x data size (long)
//   options: --runs small@140,medium@1400 --batch 32 --steps 10 --warmup 2 --profile-steps 5
//            --threads N --device cpu|cuda --json out.json
// Runs are MODEL@LENGTH, or MODEL@LENGTH:BATCH for another batch size than --batch; data is
// (batch, LENGTH, 30), or (batch, LENGTH, 16) for flatten and bilstm. small@140:1 (one sample a
// step) is where the overhead shows. A model its data is too short for (large@140) is skipped
// with encore's error.
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "benchmark_models.h"
#include "puzzle_cli.h"
#include "train/compare.h"

using namespace encore;
using examples::Row;

namespace {

const std::vector<std::string> kFull = {"small@140:1", "small@140",   "small@1400",   "small@14000",
                                        "medium@140",  "medium@1400", "medium@14000", "large@140",
                                        "large@1400",  "large@14000", "flatten@400",  "bilstm@400"};
const std::vector<std::string> kDefault = {"small@140:1", "small@140", "small@1400", "medium@140",
                                           "flatten@400"};

struct Measured {
  std::string run;
  int64_t nodes = 0;
  double eager_ms = 0, traced_ms = 0, speedup = 0, kernel_ms = 0, traced_kernel_ms = 0,
         eager_overhead_ms = 0, traced_overhead_ms = 0;
  double share() const { return eager_overhead_ms / (kernel_ms + eager_overhead_ms); }
  double bound() const { return (kernel_ms + eager_overhead_ms) / kernel_ms; }
};

std::string fmt(const char* spec, double v) {
  char b[64];
  std::snprintf(b, sizeof b, spec, v);
  return b;
}

std::vector<std::string> conclusion(const std::vector<Measured>& rows) {
  std::vector<std::string> lines;
  for (const Measured& r : rows) {
    if (r.bound() >= 1.05 && r.speedup >= 1.1)
      lines.push_back("graph mode helps " + r.run + ": " + fmt("%.0f%%", 100 * r.share()) +
                      " of its eager step is framework overhead (" +
                      fmt("%.3g", r.eager_overhead_ms) + " ms over " + std::to_string(r.nodes) +
                      " ops, " + fmt("%.3g", 1e3 * r.eager_overhead_ms / r.nodes) +
                      " us each); replay removes most of it: " + fmt("%.2fx", r.speedup));
    else if (r.bound() < 1.05 && r.speedup >= 1.1)
      lines.push_back(r.run + ": " + fmt("%.2fx", r.speedup) + " although overhead is " +
                      fmt("%.1f%%", 100 * r.share()) +
                      " of the eager step: the kernels themselves took " +
                      fmt("%.4g", r.kernel_ms) + " ms eager, " + fmt("%.4g", r.traced_kernel_ms) +
                      " ms traced (memory planned once instead of allocated per step, or a busy "
                      "machine: more --steps tell)");
    else if (r.bound() < 1.05)
      lines.push_back("graph mode cannot help " + r.run + ": kernels take " +
                      fmt("%.4g", r.kernel_ms) + " ms of its " +
                      fmt("%.4g", r.kernel_ms + r.eager_overhead_ms) +
                      " ms eager step; removing all overhead gives at most " +
                      fmt("%.3fx", r.bound()) + " (measured " + fmt("%.2fx", r.speedup) + ")");
    else
      lines.push_back(r.run + ": overhead is " + fmt("%.0f%%", 100 * r.share()) +
                      " of the eager step: at most " + fmt("%.2fx", r.bound()) + ", measured " +
                      fmt("%.2fx", r.speedup));
  }
  lines.push_back(
      "the same model gains less as its data grows: kernel time grows with the data, the per-op "
      "overhead does not");
  return lines;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> known = examples::kPuzzleOptions;
  for (const char* k : {"runs", "full", "batch", "steps", "warmup", "profile-steps"})
    known.push_back(k);
  const examples::Args args(argc, argv, known);
  return examples::guarded(args, [&] {
    const Device device = examples::puzzle_device(args);
    const int64_t batch = args.num("batch", 32);
    const int steps = static_cast<int>(args.num("steps", 10)),
              warmup = static_cast<int>(args.num("warmup", 2));
    const int profile = static_cast<int>(args.num("profile-steps", 5));
    if (batch < 1 || steps < 1 || warmup < 0 || profile < 1)
      examples::usage_error(
          args.program(), "needs --batch >= 1, --steps >= 1, --warmup >= 0, --profile-steps >= 1");
    if (args.flag("full") && args.flag("runs"))
      examples::usage_error(args.program(), "--full and --runs exclude each other");
    std::vector<std::string> runs = args.flag("full") ? kFull : kDefault;
    if (args.flag("runs")) {
      runs.clear();
      std::stringstream list(args.get("runs"));
      for (std::string r; std::getline(list, r, ',');) runs.push_back(r);
    }
    const std::string title = examples::puzzle_header(
        "puzzle 1, eager vs graph: medians of " + std::to_string(steps) + " training steps",
        device);
    std::printf("%s\n", title.c_str());
    std::vector<Measured> measured;
    std::vector<Row> rows;
    nlohmann::json reports = nlohmann::json::object(), skipped = nlohmann::json::object();
    for (const std::string& run : runs) {
      // MODEL@LENGTH or MODEL@LENGTH:BATCH
      const auto at = run.find('@'), colon = run.find(':');
      const std::string model = run.substr(0, at);
      const std::string length = at == std::string::npos ? "" : run.substr(at + 1, colon - at - 1);
      const std::string batch_text = colon == std::string::npos ? "" : run.substr(colon + 1);
      const auto& names = examples::benchmark_model_names();
      auto number = [](const std::string& v) {
        return !v.empty() && v.size() < 10 && v.find_first_not_of("0123456789") == std::string::npos
                   ? std::stoll(v)
                   : 0;
      };
      const int64_t steps_n = number(length),
                    n = colon == std::string::npos ? batch : number(batch_text);
      if (std::find(names.begin(), names.end(), model) == names.end() || steps_n < 1 || n < 1)
        examples::usage_error(args.program(),
                              "--runs: '" + run +
                                  "' is not MODEL@LENGTH or MODEL@LENGTH:BATCH "
                                  "(models: small, medium, large, flatten, bilstm)");
      const Shape shape = {n, steps_n, examples::benchmark_features(model)};
      manual_seed(0);
      auto net = examples::benchmark_model(model);
      try {
        net->build(shape);
      } catch (const ShapeError& e) {
        skipped[run] = e.what();
        std::printf("%s: skipped: %s\n", run.c_str(), e.what());
        continue;
      }
      net->to(device);
      nn::Adam adam(net->parameters(), 1e-4);
      Generator g(1);
      const Tensor x = normal(shape, 0.0, 1.0, DType::Float32, Device::cpu(), &g).to(device);
      const Tensor y =
          gt(uniform({n, 1}, 0.0, 1.0, DType::Float32, Device::cpu(), &g), 0.5).to(device);
      const CompareReport r = compare_modes(
          *net, [](const Tensor& t, const Tensor& p) { return nn::binary_crossentropy(t, p); },
          adam, BatchSource::of(Batch{x, y}),
          {.modes = {"eager", "traced"},
           .steps = steps,
           .warmup = warmup,
           .profile_steps = profile,
           .name = run});
      const ModeReport &e = r["eager"], &t = r["traced"];
      Measured m{run,
                 t.records.at(0).nodes,
                 e.step_ms_median,
                 t.step_ms_median,
                 t.speedup,
                 e.kernel_ms,
                 t.kernel_ms,
                 std::max(e.overhead_ms, 0.0),
                 std::max(t.overhead_ms, 0.0)};
      measured.push_back(m);
      rows.push_back(Row()
                         .add("run", run)
                         .add("input", std::to_string(shape[0]) + "x" + std::to_string(shape[1]) +
                                           "x" + std::to_string(shape[2]))
                         .add("nodes", m.nodes)
                         .add("eager_ms", m.eager_ms)
                         .add("traced_ms", m.traced_ms)
                         .add("speedup", m.speedup)
                         .add("kernel_ms", m.kernel_ms)
                         .add("traced_kernel_ms", m.traced_kernel_ms)
                         .add("eager_overhead_ms", m.eager_overhead_ms)
                         .add("traced_overhead_ms", m.traced_overhead_ms)
                         .add("overhead_share", m.share())
                         .add("bound", m.bound())
                         .add("us_per_node", 1e3 * m.eager_overhead_ms / m.nodes)
                         .add("first_eager_ms", e.first_call_ms)
                         .add("first_traced_ms", t.first_call_ms)
                         .add("trace_ms", t.trace_ms_total)
                         .add("break_even_step", t.break_even_step));
      reports[run] = nlohmann::json::parse(r.json());
      std::printf("%s: eager %.4g ms, traced %.4g ms\n", run.c_str(), m.eager_ms, m.traced_ms);
      std::fflush(stdout);
    }
    std::printf("\n%s\n", title.c_str());
    examples::print_table(rows);
    std::printf(
        "(ms per training step; kernel_ms and the overheads from the ledger's profiled pass; "
        "overhead_share: the eager step's non-kernel share; bound: eager / kernel, the most a "
        "graph "
        "can give)\n");
    const std::vector<std::string> lines = conclusion(measured);
    for (const std::string& l : lines) std::printf("%s\n", l.c_str());
    if (args.flag("json"))
      examples::write_puzzle_json(args.get("json"), {{"puzzle", "eager_vs_graph"},
                                                     {"device", device.str()},
                                                     {"threads", num_threads()},
                                                     {"batch", batch},
                                                     {"steps", steps},
                                                     {"rows", examples::rows_json(rows)},
                                                     {"skipped", skipped},
                                                     {"conclusion", lines},
                                                     {"reports", reports}});
    return 0;
  });
}
