// train() / eval() per module: the flag's default, the global mode on top of it, and traced
// functions that never replay a graph traced in the other mode.
#include "core/modes.h"
#include "graph/trace.h"
#include "helpers.h"
#include "nn/layers.h"
#include "nn/losses.h"
#include "nn/optim.h"

namespace encore {
namespace {

using test::bitwise_equal;

std::shared_ptr<nn::Sequential> dropout_model() {
  auto model = std::make_shared<nn::Sequential>();
  model->add<nn::Dense>(8, nn::DenseOptions{.activation = "relu"});
  model->add<nn::Dropout>(0.5);
  model->add<nn::Dense>(1);
  model->build({4, 3});
  return model;
}

TEST(TrainMode, ModulesStartInTrainingModeAndEvalIsRecursive) {
  auto model = dropout_model();
  const auto& dropout = *model->layers()[1].second;
  EXPECT_TRUE(model->is_training());
  EXPECT_TRUE(dropout.is_training());
  model->eval();
  EXPECT_FALSE(dropout.is_training());
  EXPECT_FALSE(dropout.training_flag());
  model->layers()[1].second->train();
  EXPECT_TRUE(dropout.is_training());
  EXPECT_FALSE(model->training_flag());
  {
    TrainingGuard off(false);  // the global mode turns every module's off
    EXPECT_FALSE(dropout.is_training());
  }
  EXPECT_TRUE(dropout.is_training());
  EXPECT_EQ(model->modules().size(), 4u);
}

TEST(TrainMode, EvalDisablesDropout) {
  manual_seed(1);
  auto model = dropout_model();
  const Tensor x = ones({4, 3});
  model->eval();
  const Tensor a = (*model)(x), b = (*model)(x);
  EXPECT_TRUE(bitwise_equal(a, b));
  model->train();
  const Tensor c = (*model)(x), d = (*model)(x);
  EXPECT_FALSE(bitwise_equal(c, d));
}

// Switching train/eval between calls of a traced training step: every call gives the eager
// call's bits (dropout draws included), a graph per mode, no stale replay.
TEST(TrainMode, SwitchingModesUnderTraceMatchesEagerBitwise) {
  const bool schedule[] = {true, true, false, false, true, false, true, true};
  auto run = [&](bool traced) {
    manual_seed(4);
    auto model = dropout_model();
    nn::Adam adam(model->parameters(), 0.05);
    auto body = [&](const Tensor& x, const Tensor& y) {
      adam.zero_grad();
      Tensor loss = nn::mean_squared_error(y, (*model)(x));
      loss.backward();
      adam.step();
      return loss;
    };
    auto f = trace(body);
    Generator data(2);
    std::vector<Tensor> out;
    for (bool on : schedule) {
      model->train(on);
      const Tensor x = uniform({4, 3}, -1, 1, DType::Float32, Device::cpu(), &data);
      const Tensor y = uniform({4, 1}, -1, 1, DType::Float32, Device::cpu(), &data);
      out.push_back(traced ? f(x, y) : body(x, y));
    }
    for (const Tensor& p : model->parameters()) out.push_back(p.clone());
    out.push_back(Generator::default_for(Device::cpu()).state().clone());
    if (traced) {
      EXPECT_EQ(f.stats().traces, 2);
      EXPECT_NE(f.explain().find("'dropout' is in inference mode now (training when traced)"),
                std::string::npos)
          << f.explain();
    }
    return out;
  };
  const auto eager = run(false), traced = run(true);
  ASSERT_EQ(eager.size(), traced.size());
  for (size_t i = 0; i < eager.size(); ++i) EXPECT_TRUE(bitwise_equal(eager[i], traced[i])) << i;
}

// Modules whose flag a function does not read are no guard: eval() on a model without
// dropout replays the same graph.
TEST(TrainMode, FlagsNotReadAreNoGuard) {
  nn::Dense dense(2);
  dense.build({1, 3});
  auto f = trace([&](const Tensor& x) { return dense(x); });
  f(ones({1, 3}));
  dense.eval();
  f(ones({1, 3}));
  EXPECT_EQ(f.stats().traces, 1);
  EXPECT_EQ(f.stats().hits, 1);
}

}  // namespace
}  // namespace encore
