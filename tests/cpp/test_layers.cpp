// The Keras layers of issue 9 from C++: AveragePooling1D, BatchNormalization (its moving
// statistics inside a traced training step, bitwise equal to eager over many steps; a mode
// switch retraces), LayerNormalization, Embedding (lookup, scatter-add gradient, errors),
// gelu and softmax activations and the categorical losses. Their Keras semantics against
// NumPy references are in tests/python/test_layers.py.
#include "autograd/gradcheck.h"
#include "core/modes.h"
#include "graph/trace.h"
#include "helpers.h"
#include "nn/layers.h"
#include "nn/losses.h"
#include "nn/lstm.h"
#include "nn/normalization.h"
#include "nn/optim.h"

namespace encore {
namespace {

using test::bitwise_equal;
using test::rand64;

template <class Kind, class F> std::string message_of(F&& f) {
  try {
    f();
  } catch (const Kind& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error of the expected type";
  return "";
}

TEST(Layers, AveragePoolingSameDividesByTheRealSteps) {
  const Tensor x = from_vector<double>({2, 4, 6, 8, 10}, {1, 5, 1});
  // pool 3, stride 2, 'same': 3 windows, padding (1, 1): [pad 2 4], [4 6 8], [8 10 pad].
  nn::AveragePooling1D layer({.pool_size = 3, .strides = 2, .padding = "same"});
  EXPECT_EQ(layer.build({1, 5, 1}), (Shape{1, 3, 1}));
  EXPECT_EQ(layer(x).to_vector<double>(), (std::vector<double>{3, 6, 9}));
  EXPECT_EQ(avg_pool1d(x, 2).to_vector<double>(), (std::vector<double>{3, 7}));
}

// A conv -> batch norm -> dense model trained by one step function, eagerly or traced.
struct BnRun {
  std::vector<double> losses;
  nn::NamedTensors weights;
};

BnRun train_bn(bool traced, int steps) {
  Generator init(3);
  nn::Sequential model;
  model.add<nn::Conv1D>(4, 3, nn::Conv1DOptions{.padding = "same"});
  model.add<nn::BatchNormalization>(nn::BatchNormalizationOptions{.momentum = 0.8});
  model.add<nn::ActivationLayer>("gelu");
  model.add<nn::GlobalAveragePooling1D>();
  model.add<nn::Dense>(3);
  model.build({5, 8, 2});
  // Deterministic weights whatever ran before (the layers draw from the default generator).
  {
    NoGradGuard no_grad;
    for (auto& [name, p] : model.named_parameters())
      p.copy_(uniform(p.shape(), -0.5, 0.5, p.dtype(), p.device(), &init));
  }
  nn::Adam adam(model.parameters(), 0.01);
  auto body = [&](const Tensor& x, const Tensor& y) {
    adam.zero_grad();
    Tensor loss = nn::sparse_categorical_crossentropy(y, model(x), true);
    loss.backward();
    adam.step();
    return loss;
  };
  auto step = trace(body);
  Generator data(9);
  BnRun run;
  for (int i = 0; i < steps; ++i) {
    const Tensor x = normal({5, 8, 2}, 0.5, 2.0, DType::Float32, Device::cpu(), &data);
    const Tensor y =
        clip(uniform({5}, 0, 3, DType::Float64, Device::cpu(), &data).to(DType::Int64), 0, 2);
    run.losses.push_back((traced ? step(x, y) : body(x, y)).item());
  }
  if (traced) {
    EXPECT_EQ(step.stats().traces, 1);
  }
  for (auto& [name, w] : model.named_weights()) run.weights.emplace_back(name, w.clone());
  return run;
}

TEST(Layers, BatchNormalizationTracedTrainingIsBitwiseEagerOverManySteps) {
  const BnRun eager = train_bn(false, 25), traced = train_bn(true, 25);
  EXPECT_EQ(eager.losses, traced.losses);
  ASSERT_EQ(eager.weights.size(), traced.weights.size());
  bool moved = false;
  for (size_t i = 0; i < eager.weights.size(); ++i) {
    EXPECT_EQ(eager.weights[i].first, traced.weights[i].first);
    EXPECT_TRUE(bitwise_equal(eager.weights[i].second, traced.weights[i].second))
        << eager.weights[i].first;
    if (eager.weights[i].first.ends_with("moving_mean"))
      moved = max(abs(eager.weights[i].second)).item() > 0;
  }
  EXPECT_TRUE(moved);
}

TEST(Layers, BatchNormalizationModeSwitchRetracesInsteadOfReplaying) {
  nn::BatchNormalization traced_bn({.momentum = 0.5}), eager_bn({.momentum = 0.5});
  auto f = trace([&](const Tensor& x) { return traced_bn(x); });
  const Tensor x = rand64({6, 3}, 4).to(DType::Float32);
  for (bool mode : {true, false, true, false, true}) {
    TrainingGuard guard(mode);
    EXPECT_TRUE(bitwise_equal(f(x), eager_bn(x))) << "training " << mode;
    EXPECT_TRUE(bitwise_equal(traced_bn.moving_variance(), eager_bn.moving_variance()));
  }
  EXPECT_EQ(f.stats().traces, 2);
  // Inference normalizes with the moving statistics, which training moved.
  TrainingGuard off(false);
  const Tensor mean = traced_bn.moving_mean().reshape({1, 3}),
               var = traced_bn.moving_variance().reshape({1, 3});
  EXPECT_LT(test::max_abs_diff(traced_bn(x), (x - mean) / sqrt(var + 1e-3)), 1e-6);
}

TEST(Layers, NormalizationErrors) {
  nn::BatchNormalization bn;
  bn.build({2, 3});
  EXPECT_NE(message_of<ValueError>([&] {
              bn(zeros({0, 3}));
            })
                .find("[batch_normalization] cannot take batch "
                      "statistics of the empty input (0, 3)"),
            std::string::npos);
  EXPECT_NE(message_of<ShapeError>([&] {
              bn(zeros({2, 4}));
            })
                .find("has 4 channels on axis -1 but the layer was "
                      "built for 3"),
            std::string::npos);
  EXPECT_NE(
      message_of<DTypeError>([&] { layer_norm(zeros({2}, DType::Int64)); }).find("[layer_norm]"),
      std::string::npos);
  EXPECT_NE(message_of<ShapeError>([&] {
              batch_norm(zeros({2, 3}), zeros({3}), ones({2}));
            })
                .find("[batch_norm] variance (2,) float32 on cpu must be (3,) for axis 1 of (2, 3) "
                      "float32"),
            std::string::npos);
}

TEST(Layers, LayerNormalizationNormalizesEachSample) {
  const Tensor x = rand64({4, 5}, 6);
  nn::LayerNormalization layer;
  layer.build(x.shape());
  layer.to(DType::Float64);
  const Tensor y = layer(x);
  const auto [mean, var] = moments(y, {1});
  EXPECT_LT(test::max_abs_diff(mean, zeros({4}, DType::Float64)), 1e-12);
  // var(y) = var / (var + epsilon) for each sample.
  const auto [m0, v0] = moments(x, {1});
  EXPECT_LT(test::max_abs_diff(var, v0 / (v0 + 1e-3)), 1e-12);
}

TEST(Layers, EmbeddingGradientIsADeterministicScatterAdd) {
  Tensor table = rand64({4, 2}, 7);
  table.set_requires_grad();
  const Tensor idx = from_vector<int32_t>({3, 1, 3, 3, 0}, {5});
  const Tensor g = rand64({5, 2}, 8);
  sum(embedding(table, idx) * g).backward();
  const std::vector<double> gv = g.to_vector<double>(), got = table.grad().to_vector<double>();
  std::vector<double> want(8, 0.0);
  for (int n : {0, 1, 2, 3, 4})
    for (int d = 0; d < 2; ++d) want[idx.to_vector<int32_t>()[n] * 2 + d] += gv[n * 2 + d];
  EXPECT_EQ(got, want);  // index order: bit for bit
  EXPECT_NE(
      message_of<ValueError>([&] {
        embedding(table, from_vector<int64_t>({0, 4}, {2}));
      }).find("[embedding] index 4 (element 1 of indices (2,)) is out of range for input_dim 4"),
      std::string::npos);
  EXPECT_NE(message_of<DTypeError>([&] {
              nn::Embedding(4, 2)(zeros({3}));
            }).find("[embedding] indices must be int32 or int64, got (3,) float32"),
            std::string::npos);
  EXPECT_EQ(nn::Embedding(4, 2)(zeros({0, 3}, DType::Int64)).shape(), (Shape{0, 3, 2}));
}

TEST(Layers, GeluApproximateGradcheck) {
  const auto result =
      gradcheck([](const std::vector<Tensor>& x) { return std::vector<Tensor>{gelu(x[0], true)}; },
                {rand64({3, 4}, 10) * 3.0});
  EXPECT_TRUE(result.ok) << result.report;
  const Tensor z = test::rand32({2, 5}, 11);
  const Tensor p = nn::Dense(3, {.activation = "softmax"})(z);
  EXPECT_LT(test::max_abs_diff(sum(p, {1}), ones({2})), 1e-6);
  EXPECT_NE(message_of<ValueError>([] {
              nn::LSTM(2, {.activation = "softmax"});
            }).find("[lstm] activation 'softmax' is not elementwise"),
            std::string::npos);
}

TEST(Layers, CategoricalCrossentropyOfOneHotIsSparse) {
  const Tensor logits = rand64({3, 4}, 12) * 5.0;
  const Tensor labels = from_vector<int64_t>({2, 0, 3}, {3});
  const Tensor one_hot = from_vector<double>({0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 1}, {3, 4});
  for (bool from_logits : {true, false}) {
    const Tensor pred = from_logits ? logits : softmax(logits);
    EXPECT_NEAR(nn::categorical_crossentropy(one_hot, pred, from_logits).item(),
                nn::sparse_categorical_crossentropy(labels, pred, from_logits).item(), 1e-12);
  }
  EXPECT_NE(
      message_of<ShapeError>([&] {
        nn::categorical_crossentropy(zeros({4}), zeros({4, 3}));
      }).find("[categorical_crossentropy] targets (4,) and predictions (4, 3) differ in shape"),
      std::string::npos);
}

}  // namespace
}  // namespace encore
