// Eager dispatch overhead: a chain of small elementwise ops on tiny tensors (median ns per
// op, with and without autograd recording), a traced-call cache hit, the cost of a structured
// retrace record, compare_modes' own cost against a bare loop of replays, and the per-step time
// of the small model on this device, eager and traced. Prints a table; --json FILE writes it.
//
//   bench_overhead [--ops 2000] [--repeats 30] [--steps 30] [--json out.json]
#include <cstdio>

#include "common.h"
#include "encore.h"
#include "graph/trace.h"
#include "train/compare.h"

using namespace encore;

namespace {

double time_chain(const Tensor& x, int ops) {
  const auto t0 = std::chrono::steady_clock::now();
  Tensor y = x;
  for (int i = 0; i < ops / 2; ++i) y = tanh(y * 0.5);
  return examples::seconds_since(t0) * 1e9 / ops;
}

}  // namespace

int main(int argc, char** argv) {
  const examples::Args args(argc, argv, {"ops", "repeats", "steps", "device", "json"});
  return examples::guarded(args, [&] {
    const int ops = static_cast<int>(args.num("ops", 2000)),
              repeats = static_cast<int>(args.num("repeats", 30));
    const int steps = static_cast<int>(args.num("steps", 30));
    const Device device = examples::pick_device(args);
    std::vector<examples::Row> rows;

    // 1. Per-op dispatch overhead on a 4-element tensor (the kernels take a few ns).
    for (bool grad : {false, true}) {
      Tensor x = full({4}, 0.5, DType::Float32, device);
      if (grad) x.set_requires_grad(true);
      std::vector<double> ns;
      for (int r = 0; r < repeats + 3; ++r) {
        const double v = time_chain(x, ops);
        synchronize(device);
        if (r >= 3) ns.push_back(v);
      }
      rows.push_back(examples::Row()
                         .add("benchmark", grad ? "eager op, recording autograd" : "eager op")
                         .add("device", device.str())
                         .add("median_us", examples::median(ns) / 1e3)
                         .add("unit", "per op"));
    }

    // 2. A traced call that hits the cache: signature lookup, bind, one replay of one op.
    {
      auto f = trace([](const Tensor& a, const Tensor& b) { return a + b; });
      const Tensor a = full({4}, 1.0, DType::Float32, device),
                   b = full({4}, 2.0, DType::Float32, device);
      f(a, b);
      std::vector<double> us;
      for (int r = 0; r < repeats; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < 1000; ++i) f(a, b);
        synchronize(device);
        us.push_back(examples::seconds_since(t0) * 1e6 / 1000);
      }
      rows.push_back(examples::Row()
                         .add("benchmark", "traced call (cache hit, 2 inputs, 1 op)")
                         .add("device", device.str())
                         .add("median_us", examples::median(us))
                         .add("unit", "per call"));
    }

    // 3. The cache lookup itself: matching a call's arguments against a cached signature.
    {
      std::vector<graph::Arg> call;
      for (int i = 0; i < 8; ++i)
        call.emplace_back(full({32, 140, 30}, 1.0, DType::Float32, device));
      const graph::Signature sig = graph::Signature::of(call);
      std::vector<double> ns;
      for (int r = 0; r < repeats; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        int hits = 0;
        for (int i = 0; i < 10000; ++i) hits += sig.matches(call);
        ns.push_back(examples::seconds_since(t0) * 1e9 / 10000 / 8);
        if (hits != 10000) return 1;
      }
      rows.push_back(examples::Row()
                         .add("benchmark", "signature lookup on a hit")
                         .add("device", device.str())
                         .add("median_us", examples::median(ns) / 1e3)
                         .add("unit", "per tensor input"));
    }

    // 4. A retrace's structured record: the causes of a new signature against the cached one
    //    (what a trace adds over the old text-only explanation), per retrace.
    {
      const std::vector<graph::Arg> before = {full({32, 140, 30}, 1.0, DType::Float32, device),
                                              int64_t{3}};
      const std::vector<graph::Arg> after = {full({32, 150, 30}, 1.0, DType::Float32, device),
                                             int64_t{3}};
      const graph::Signature a = graph::Signature::of(before), b = graph::Signature::of(after);
      const std::vector<std::string> names = {"x", "k"};
      std::vector<double> ns;
      size_t causes = 0;
      for (int r = 0; r < repeats; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < 1000; ++i) causes += b.changes(a, names).size();
        ns.push_back(examples::seconds_since(t0) * 1e9 / 1000);
      }
      if (causes == 0) return 1;
      rows.push_back(examples::Row()
                         .add("benchmark", "structured retrace record (one shape axis changed)")
                         .add("device", device.str())
                         .add("median_us", examples::median(ns) / 1e3)
                         .add("unit", "per retrace"));
    }

    // 5. compare_modes' own cost: its measured traced step of the tiny Dense model against a
    //    bare loop of replays of the same step, in one run.
    {
      manual_seed(0);
      nn::Sequential tiny;
      tiny.add<nn::Dense>(32, nn::DenseOptions{.activation = "relu"});
      tiny.add<nn::GlobalAveragePooling1D>();
      tiny.add<nn::Dense>(1, nn::DenseOptions{.activation = "sigmoid"});
      tiny.build({32, 4, 8});
      tiny.to(device);
      nn::Adam tiny_adam(tiny.parameters(), 1e-3);
      const Tensor x = full({32, 4, 8}, 0.5, DType::Float32, device),
                   y = full({32, 1}, 1.0, DType::Float32, device);
      const Step tiny_step = [&](const Batch& b) -> std::vector<Tensor> {
        tiny_adam.zero_grad();
        Tensor loss = nn::binary_crossentropy(b[1], tiny(b[0]));
        loss.backward();
        tiny_adam.step();
        return {loss};
      };
      const CompareReport report = compare_modes(tiny_step, BatchSource::of(Batch{x, y}),
                                                 {.modes = {"traced"}, .steps = steps * 10});
      TracedFunction bare(
          [&](const std::vector<graph::Arg>& a) {
            return tiny_step({std::get<Tensor>(a[0]), std::get<Tensor>(a[1])});
          },
          {.name = "bare"});
      const std::vector<graph::Arg> call = {x, y};
      std::vector<double> us;
      for (int i = 0; i < steps * 10 + 3; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        bare(call);
        synchronize(device);
        if (i >= 3) us.push_back(examples::seconds_since(t0) * 1e6);
      }
      rows.push_back(examples::Row()
                         .add("benchmark", "tiny model step, traced, measured by compare_modes")
                         .add("device", device.str())
                         .add("median_us", report["traced"].step_ms_median * 1e3)
                         .add("unit", "per step"));
      rows.push_back(examples::Row()
                         .add("benchmark", "tiny model step, traced, bare loop of replays")
                         .add("device", device.str())
                         .add("median_us", examples::median(us))
                         .add("unit", "per step"));
    }

    // 6. The small model's training step, eager and traced.
    manual_seed(0);
    nn::Sequential model;
    model.add<nn::Conv1D>(128, 40, nn::Conv1DOptions{.strides = 4, .padding = "same"});
    model.add<nn::GlobalAveragePooling1D>();
    model.add<nn::Dropout>(0.5);
    model.add<nn::Dense>(64, nn::DenseOptions{.activation = "relu"});
    model.add<nn::Dense>(1, nn::DenseOptions{.activation = "sigmoid"});
    model.build({32, 140, 30});
    model.to(device);
    nn::Adam adam(model.parameters(), 1e-3);
    const auto data = examples::make_frequency_task(32, 140, 30, 7, device);
    auto step = [&](const Tensor& x, const Tensor& y) {
      adam.zero_grad();
      Tensor loss = nn::binary_crossentropy(y, model(x));
      loss.backward();
      adam.step();
      return loss;
    };
    auto traced = trace(step, {.name = "small_step"});
    for (bool use_trace : {false, true}) {
      std::vector<double> ms;
      for (int i = 0; i < steps + 5; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        use_trace ? traced(data.x, data.y) : step(data.x, data.y);
        synchronize(device);
        if (i >= 5) ms.push_back(examples::seconds_since(t0) * 1e3);
      }
      rows.push_back(
          examples::Row()
              .add("benchmark", use_trace ? "small model step, traced" : "small model step, eager")
              .add("device", device.str())
              .add("median_us", examples::median(ms) * 1e3)
              .add("unit", "per step"));
    }

    examples::print_table(rows);
    if (args.flag("json")) examples::write_json(args.get("json"), rows);
    return 0;
  });
}
