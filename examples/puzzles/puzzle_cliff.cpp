// Puzzle 3: a one-step configuration change moves speed a lot (a performance cliff). The C++
// twin of examples/puzzles/p3_cliff.py; docs/puzzles/3-cliff.md explains a run.
//
// A Conv1D with kernel size 1 is swept over its padding 0..8 (or over the kernel size 1..5,
// --sweep kernel). Every point times the forward call under each autotune policy and names the
// implementation that ran it: heuristic (oneDNN's first choice, the default), exhaustive
// (every implementation timed, the fastest kept) and off (the GEMM-based convolution). The
// GEMM-based one falls off a cliff between padding 0 and 1 (its input stops being the GEMM's
// matrix and is copied out first, im2col); the others change algorithm instead.
//
//   puzzle_cliff [--full] [--sweep padding|kernel] [--kernel 1] [--threads 1] [--reps 20]
//                [--batch N --length N --channels N --filters N] [--device cpu|cuda] [--json F]
#include <cstdio>

#include "../common.h"
#include "core/ledger.h"
#include "encore.h"
#include "ops/autotune.h"
#include "puzzle_cli.h"

using namespace encore;

namespace {

constexpr autotune::Policy kPolicies[] = {autotune::Policy::Heuristic, autotune::Policy::Exhaustive,
                                          autotune::Policy::Off};

struct Point {
  double ms, setup_ms;
  autotune::Entry entry;
};

// The fastest of `reps` forward calls after the first (which pays the per-shape setup).
Point measure(const Tensor& x, const Tensor& w, int64_t padding, int reps) {
  autotune::clear();  // every point starts without a stored choice
  Ledger& ledger = Ledger::global();
  const int64_t setup0 = ledger.get(Counter::AutotuneNs);
  conv1d(x, w, 1, Padding::explicit_(padding, padding));
  synchronize(x.device());
  Point p{INFINITY, (ledger.get(Counter::AutotuneNs) - setup0) / 1e6, {}};
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    conv1d(x, w, 1, Padding::explicit_(padding, padding));
    synchronize(x.device());
    p.ms = std::min(p.ms, examples::seconds_since(t0) * 1e3);
  }
  for (const autotune::Entry& e : autotune::entries())
    if (e.op == "conv1d") p.entry = e;
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> known = examples::kPuzzleOptions;
  known.insert(known.end(),
               {"full", "sweep", "kernel", "reps", "batch", "length", "channels", "filters"});
  const examples::Args args(argc, argv, known);
  set_num_threads(1);  // a quiet measurement unless --threads says otherwise
  const Device device = examples::puzzle_device(args);
  const std::string sweep = args.get("sweep", "padding");
  if (sweep != "padding" && sweep != "kernel")
    examples::usage_error(args.program(), "--sweep must be padding or kernel, got '" + sweep + "'");
  const bool full = args.flag("full");
  const int64_t n = args.num("batch", full ? 32 : 16),
                length = args.num("length", full ? 4000 : 1000),
                channels = args.num("channels", full ? 256 : 64),
                filters = args.num("filters", full ? 256 : 64), kernel = args.num("kernel", 1);
  const int reps = static_cast<int>(args.num("reps", 20));
  return examples::guarded(args, [&] {
    Generator gx(1), gw(2);
    const Tensor x =
        normal({n, length, channels}, 0.0, 1.0, DType::Float32, Device::cpu(), &gx).to(device);
    std::vector<examples::Row> rows;
    for (int64_t point = sweep == "padding" ? 0 : 1; point <= (sweep == "padding" ? 8 : 5);
         ++point) {
      const int64_t k = sweep == "padding" ? kernel : point,
                    padding = sweep == "padding" ? point : 0;
      const Tensor w =
          (normal({k, channels, filters}, 0.0, 1.0, DType::Float32, Device::cpu(), &gw) * 0.1)
              .to(device);
      examples::Row row;
      row.add(sweep, point);
      int64_t timed = 0;
      for (autotune::Policy policy : kPolicies) {
        autotune::set_policy(policy);
        const Point p = measure(x, w, padding, reps);
        const std::string name(autotune::name(policy));
        row.add(name + "_ms", p.ms)
            .add(name + "_impl", p.entry.algorithm)
            .add(name + "_setup_ms", p.setup_ms);
        if (policy == autotune::Policy::Exhaustive)
          timed = static_cast<int64_t>(p.entry.timings.size());
      }
      row.add("timed", timed);
      rows.push_back(row);
    }
    autotune::set_policy(autotune::Policy::Heuristic);
    std::printf(
        "puzzle 3 on %s: Conv1D sweep over %s, x (%lld, %lld, %lld), %lld filters, forward ms "
        "(fastest of %d)\n",
        device.str().c_str(), sweep.c_str(), static_cast<long long>(n),
        static_cast<long long>(length), static_cast<long long>(channels),
        static_cast<long long>(filters), reps);
    examples::print_table(rows);
    if (args.flag("json")) examples::write_json(args.get("json"), rows);
    return 0;
  });
}
