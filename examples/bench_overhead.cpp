// Eager dispatch overhead: a chain of small elementwise ops on tiny tensors (median ns per
// op, with and without autograd recording), a traced-call cache hit, and the per-step time of
// the small model on this device, eager and traced. Prints a table; --json FILE writes it.
//
//   bench_overhead [--ops 2000] [--repeats 30] [--steps 30] [--json out.json]
#include <cstdio>

#include "common.h"
#include "encore.h"
#include "graph/trace.h"

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
    const int ops = static_cast<int>(args.num("ops", 2000)), repeats = static_cast<int>(args.num("repeats", 30));
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
      const Tensor a = full({4}, 1.0, DType::Float32, device), b = full({4}, 2.0, DType::Float32, device);
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
      for (int i = 0; i < 8; ++i) call.emplace_back(full({32, 140, 30}, 1.0, DType::Float32, device));
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

    // 4. The small model's training step, eager and traced.
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
      rows.push_back(examples::Row()
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
