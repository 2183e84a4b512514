// The demo: encore::compare_modes (train/compare.h) on the models where the difference between
// eager execution, traced replay, retracing and bucketing is instructive. A thin caller: the
// measurements, the table and the JSON all come from the library call, which measures your
// own model the same way.
//
//   models   small       Conv1D(128, 40, strides 4, same) -> GAP -> Dropout -> Dense(64) ->
//   Dense(1)
//                        batch (32, 140, 30): kernel-dominated
//            tiny_dense  Dense(32, relu) per step -> GAP -> Dense(1), batch (32, 4, 8):
//                        overhead-dominated
//            per_step    Conv1D(16, 5, causal, relu) -> Dense(1) per step, a loss on the first
//                        steps, batch (32, 40, 8): a model bucketing serves exactly
//            lstm        Bidirectional(LSTM(units)) -> Dense(1) on (32, length, 16)
//                        (--lstm; the medium model is --lstm-units 512 --lstm-length 400)
//   modes    eager, traced, eager_new_length, traced_new_length (a new length every call),
//            bucket (the new lengths padded to a few sizes, the layers masking with the true
//            length; refused, with the reason, where the step cannot be made exact)
//
//   compare_modes [--steps 30] [--device cpu|cuda] [--json out.json] [--only MODEL]
//                 [--lstm [--lstm-units 64] [--lstm-length 50] [--lstm-impl auto|composed|cudnn]]
#include <cstdio>
#include <fstream>

#include "common.h"
#include "encore.h"
#include "train/compare.h"

using namespace encore;

namespace {

struct Demo {
  std::string name;
  Shape input;  // batch, steps, features
  std::function<std::shared_ptr<nn::Sequential>()> build;
  std::vector<int64_t> buckets;
  // The loss of the model's output against y: per-step models score the first steps only.
  LossFn loss = [](const Tensor& y, const Tensor& p) { return nn::binary_crossentropy(y, p); };
};

std::vector<Demo> demos(const examples::Args& args) {
  std::vector<Demo> m;
  m.push_back({"small",
               {32, 140, 30},
               [] {
                 auto s = std::make_shared<nn::Sequential>();
                 s->add<nn::Conv1D>(128, 40, nn::Conv1DOptions{.strides = 4, .padding = "same"});
                 s->add<nn::GlobalAveragePooling1D>();
                 s->add<nn::Dropout>(0.5);
                 s->add<nn::Dense>(64, nn::DenseOptions{.activation = "relu"});
                 s->add<nn::Dense>(1, nn::DenseOptions{.activation = "sigmoid"});
                 return s;
               },
               {160, 192, 224}});
  m.push_back({"tiny_dense",
               {32, 4, 8},
               [] {
                 auto s = std::make_shared<nn::Sequential>();
                 s->add<nn::Dense>(32, nn::DenseOptions{.activation = "relu"});
                 s->add<nn::GlobalAveragePooling1D>();
                 s->add<nn::Dense>(1, nn::DenseOptions{.activation = "sigmoid"});
                 return s;
               },
               {16, 32, 64}});
  m.push_back({"per_step",
               {32, 40, 8},
               [] {
                 auto s = std::make_shared<nn::Sequential>();
                 s->add<nn::Conv1D>(16, 5,
                                    nn::Conv1DOptions{.padding = "causal", .activation = "relu"});
                 s->add<nn::Dense>(1, nn::DenseOptions{.activation = "sigmoid"});
                 return s;
               },
               {48, 64, 96},
               [](const Tensor& y, const Tensor& p) {
                 return nn::binary_crossentropy(y, p.slice(1, 0, 8).reshape({p.shape()[0], 8}));
               }});
  if (args.flag("lstm")) {
    const int64_t units = args.num("lstm-units", 64), length = args.num("lstm-length", 50);
    const std::string impl = args.get("lstm-impl", "auto");
    if (impl != "auto" && impl != "composed" && impl != "cudnn")
      examples::usage_error(args.program(),
                            "--lstm-impl must be auto, composed or cudnn, got '" + impl + "'");
    const nn::LSTMImplementation which = impl == "composed" ? nn::LSTMImplementation::Composed
                                         : impl == "cudnn"  ? nn::LSTMImplementation::Cudnn
                                                            : nn::LSTMImplementation::Auto;
    m.push_back({"lstm",
                 {32, length, 16},
                 [units, which] {
                   auto s = std::make_shared<nn::Sequential>();
                   s->add(std::make_shared<nn::Bidirectional>(std::make_shared<nn::LSTM>(
                       units, nn::LSTMOptions{.implementation = which})));
                   s->add<nn::Dense>(1, nn::DenseOptions{.activation = "sigmoid"});
                   return s;
                 },
                 {length + 16, length + 32, length + 64}});
  }
  if (args.flag("only")) {
    std::erase_if(m, [&](const Demo& d) { return d.name != args.get("only"); });
    if (m.empty())
      examples::usage_error(args.program(), "--only: no model named '" + args.get("only") + "'");
  }
  return m;
}

// Synthetic data: labels from the sign of the first value (per-step models: of each of the
// first 8 steps' first feature).
Batch batch(const Demo& d, int64_t length, uint64_t seed, Device device) {
  Generator g(seed);
  const int64_t n = d.input[0], features = d.input[2];
  Tensor x = normal({n, length, features}, 0.0, 1.0, DType::Float32, Device::cpu(), &g);
  const int64_t labels = d.name == "per_step" ? 8 : 1;
  Tensor y = gt(x.slice(1, 0, labels).slice(2, 0, 1).reshape({n, labels}), 0.0);
  return {x.to(device), y.to(device)};
}

}  // namespace

int main(int argc, char** argv) {
  const examples::Args args(
      argc, argv,
      {"steps", "device", "json", "only", "lstm", "lstm-units", "lstm-length", "lstm-impl"});
  return examples::guarded(args, [&] {
    const Device device = examples::pick_device(args);
    const int steps = static_cast<int>(args.num("steps", 30));
    if (steps < 1) examples::usage_error(args.program(), "--steps must be at least 1");
    std::printf("encore compare_modes on %s (flush denormals %s, tf32 %s)\n\n",
                device.str().c_str(), flush_denormal() ? "on" : "off", allow_tf32() ? "on" : "off");
    std::string json = "[";
    for (const Demo& d : demos(args)) {
      manual_seed(0);
      auto model = d.build();
      model->build(d.input);
      model->to(device);
      nn::Adam adam(model->parameters(), 1e-3);
      const BatchSource data = BatchSource::of(
          [&](int64_t length) { return batch(d, length, static_cast<uint64_t>(length), device); },
          d.input[1]);
      const CompareReport r = compare_modes(
          *model, d.loss, adam, data,
          {.modes = {"eager", "traced", "eager_new_length", "traced_new_length", "bucket"},
           .steps = steps,
           .buckets = d.buckets,
           .name = d.name});
      std::printf("%s\n", r.table().c_str());
      json += (json.size() > 1 ? ",\n" : "\n") + r.json();
    }
    if (args.flag("json")) {
      std::ofstream(args.get("json")) << json << "\n]\n";
      std::printf("wrote %s\n", args.get("json").c_str());
    }
    return 0;
  });
}
