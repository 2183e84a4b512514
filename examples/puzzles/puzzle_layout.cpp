// Puzzle 4: layout conversions cost. The C++ twin of examples/puzzles/p4_layout.py;
// docs/puzzles/4-layout.md explains a run.
//
// The same conv stack (convs x Conv1D(filters, 12, same, relu) -> GlobalAveragePooling1D ->
// Dense(1, sigmoid), Adam, binary cross-entropy) trained with a traced step three ways: native
// (channels-last, nothing converted), channels_first (a transpose there and back around every
// conv: `copy` nodes in the traced graph) and blocked (set_conv1d_layout(Blocked): oneDNN's
// preferred activation layout, converted by to_blocked / from_blocked nodes, which the traced
// Plan keeps only where the stack meets channels-last; the ledger counts their runs and time as
// layout_reorders / layout_reorder_ns). The variants take their steps in turn;
// each row describes its variant's fastest of --steps profiled steps.
//
//   puzzle_layout [--full] [--steps 10] [--batch 8] [--length 500] [--channels 64] [--filters 64]
//                 [--convs 4] [--threads N] [--show-graph] [--device cpu|cuda] [--json F]
#include <cstdio>

#include "../common.h"
#include "core/ledger.h"
#include "encore.h"
#include "graph/plan.h"
#include "ops/conv.h"
#include "puzzle_cli.h"

using namespace encore;

namespace {

struct Sizes {
  int64_t batch, length, channels, filters, convs, steps;
};

std::shared_ptr<TracedFunction> make_step(const Sizes& s, const std::string& variant) {
  manual_seed(0);
  std::vector<std::shared_ptr<nn::Conv1D>> convs;
  Shape shape{s.batch, s.length, s.channels};
  for (int64_t i = 0; i < s.convs; ++i) {
    convs.push_back(std::make_shared<nn::Conv1D>(
        s.filters, 12, nn::Conv1DOptions{.padding = "same", .activation = "relu"}));
    shape = convs.back()->build(shape);
  }
  auto head = std::make_shared<nn::Sequential>();
  head->add<nn::GlobalAveragePooling1D>();
  head->add<nn::Dense>(1, nn::DenseOptions{.activation = "sigmoid"});
  head->build(shape);
  std::vector<Tensor> params = head->parameters();
  for (const auto& c : convs)
    for (const Tensor& p : c->parameters()) params.push_back(p);
  auto adam = std::make_shared<nn::Adam>(params, 1e-4);
  const bool channels_first = variant == "channels_first";
  auto forward = [convs, head, channels_first](Tensor x) {
    if (!channels_first) {
      for (const auto& c : convs) x = (*c)(x);
      return (*head)(x);
    }
    Tensor h = x.transpose(1, 2).contiguous();  // (batch, channels, steps) between layers
    for (const auto& c : convs)
      h = (*c)(h.transpose(1, 2).contiguous()).transpose(1, 2).contiguous();
    return (*head)(h.transpose(1, 2).contiguous());
  };
  return std::make_shared<TracedFunction>(
      [adam, forward](const std::vector<graph::Arg>& a) {
        adam->zero_grad();
        Tensor loss =
            nn::binary_crossentropy(std::get<Tensor>(a[1]), forward(std::get<Tensor>(a[0])));
        loss.backward();
        adam->step();
        return std::vector<Tensor>{loss};
      },
      TraceOptions{.name = "step_" + variant});
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> known = examples::kPuzzleOptions;
  known.insert(known.end(),
               {"full", "steps", "batch", "length", "channels", "filters", "convs", "show-graph"});
  const examples::Args args(argc, argv, known);
  if (examples::puzzle_device(args).is_cuda()) {
    std::printf(
        "%s: skipped: --device %s: the layouts compared are the CPU's (cuDNN picks its own inside "
        "each call)\n",
        args.program().c_str(), args.get("device").c_str());
    return 0;
  }
  const bool full = args.flag("full");
  const Sizes s{args.num("batch", full ? 32 : 8), args.num("length", full ? 1400 : 500),
                args.num("channels", 64),         args.num("filters", full ? 128 : 64),
                args.num("convs", full ? 6 : 4),  args.num("steps", 10)};
  return examples::guarded(args, [&] {
    Generator gx(1), gy(2);
    const Tensor x =
        normal({s.batch, s.length, s.channels}, 0.0, 1.0, DType::Float32, Device::cpu(), &gx);
    const Tensor y = gt(normal({s.batch, 1}, 0.0, 1.0, DType::Float32, Device::cpu(), &gy), 0.0)
                         .to(DType::Float32);
    Ledger& ledger = Ledger::global();
    const std::vector<std::string> variants = {"native", "channels_first", "blocked"};
    // Each variant traced and replayed once under its layout: its Plan keeps the convolutions
    // prepared for that layout whatever the setting is later.
    std::vector<std::shared_ptr<TracedFunction>> steps;
    for (const std::string& variant : variants) {
      set_conv1d_layout(variant == "blocked" ? Conv1dLayout::Blocked : Conv1dLayout::Native);
      steps.push_back(make_step(s, variant));
      for (int i = 0; i < 2; ++i) (*steps.back())({x, y});
    }
    set_conv1d_layout(Conv1dLayout::Native);
    // The variants take their steps in turn, so whatever else the machine does hits them
    // alike; each row describes its variant's fastest step, profiled.
    struct Best {
      double ms = INFINITY, copy_ms = 0, conv_ms = 0, reorder_ms = 0;
      int64_t reorders = 0;
    };
    std::vector<Best> best(variants.size());
    ledger.set_profiling(true);
    for (int64_t round = 0; round < s.steps; ++round) {
      for (size_t v = 0; v < variants.size(); ++v) {
        ledger.reset();
        const auto t0 = std::chrono::steady_clock::now();
        (*steps[v])({x, y});
        const double ms = examples::seconds_since(t0) * 1e3;
        if (ms >= best[v].ms) continue;
        Best b{.ms = ms};
        for (const TraceEvent& e : ledger.events()) {
          if (std::string_view(e.category) != "kernel") continue;
          if (e.name == "copy") b.copy_ms += e.duration_ns / 1e6;
          if (e.name.starts_with("conv1d")) b.conv_ms += e.duration_ns / 1e6;
        }
        b.reorders = ledger.get(Counter::LayoutReorders);
        b.reorder_ms = ledger.get(Counter::LayoutReorderNs) / 1e6;
        best[v] = b;
      }
    }
    ledger.set_profiling(false);
    std::vector<examples::Row> rows;
    for (size_t v = 0; v < variants.size(); ++v) {
      const graph::Graph& g = steps[v]->last_plan()->graph();
      if (args.flag("show-graph"))
        std::printf("--- %s ---\n%s", variants[v].c_str(), g.str().c_str());
      rows.push_back(examples::Row()
                         .add("variant", variants[v])
                         .add("step_ms", best[v].ms)
                         .add("graph_nodes", static_cast<int64_t>(g.nodes.size()))
                         .add("copy_nodes", static_cast<int64_t>(g.count("copy")))
                         .add("copy_ms", best[v].copy_ms)
                         .add("conversion_nodes",
                              static_cast<int64_t>(g.count("to_blocked") + g.count("from_blocked")))
                         .add("reorders_per_step", best[v].reorders)
                         .add("reorder_ms", best[v].reorder_ms)
                         .add("conv_ms", best[v].conv_ms));
    }
    set_conv1d_layout(Conv1dLayout::Native);
    std::printf(
        "puzzle 4 on cpu: %lld x Conv1D(%lld, 12, same, relu) training step, traced, on (%lld, "
        "%lld, %lld), "
        "fastest of %lld steps\n",
        static_cast<long long>(s.convs), static_cast<long long>(s.filters),
        static_cast<long long>(s.batch), static_cast<long long>(s.length),
        static_cast<long long>(s.channels), static_cast<long long>(s.steps));
    examples::print_table(rows);
    if (args.flag("json")) examples::write_json(args.get("json"), rows);
    return 0;
  });
}
