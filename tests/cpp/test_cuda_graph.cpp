// CUDA Graph capture and replay through encore::trace: a replayed training step is bitwise the
// eager step, arguments the function never reads, alias outputs, steps that cannot be captured
// (captures that other threads' eager work cannot enter: tests/cuda/test_capture_scope.cpp).
// The TracedReplay tests run on the CPU too, where the same Plan replays without a graph: the
// expectations are the same.
#include <string>

#include "core/ledger.h"
#include "graph/device_graph.h"
#include "graph/trace.h"
#include "helpers.h"
#include "nn/layers.h"
#include "nn/losses.h"
#include "nn/optim.h"
#include "ops/dispatch.h"
#include "ops/reduce.h"

namespace encore {

// Test names and failure messages show "cpu" / "cuda:0" for the device parameter.
void PrintTo(const Device& d, std::ostream* os) { *os << d.str(); }

namespace {

using test::bitwise_equal;
using test::expect_values;
using test::kGpu;
using test::rand32;

class TracedReplay : public testing::TestWithParam<Device> {
 protected:
  void SetUp() override {
    if (GetParam().is_cuda()) REQUIRE_CUDA();
  }
};

// Several training steps of a small model with Conv1D, Dropout, Dense and Adam on `device`,
// eager or traced, from the same seed.
struct Training {
  std::vector<Tensor> losses, dropped;  // per step: the loss and the dropout layer's output
  std::vector<Tensor> params, grads, state;
  int64_t traces = 0;
  bool captured = false;
};

Training train(Device device, bool traced, int steps) {
  manual_seed(0);
  nn::Sequential features;
  features.add<nn::Conv1D>(
      8, 3, nn::Conv1DOptions{.strides = 2, .padding = "same", .activation = "relu"});
  features.add<nn::GlobalAveragePooling1D>();
  nn::Dropout drop(0.5);
  nn::Dense head(1);
  const Shape xshape{8, 12, 4};
  head.build(features.build(xshape));
  features.to(device);
  head.to(device);
  std::vector<Tensor> params = features.parameters();
  for (const Tensor& p : head.parameters()) params.push_back(p);
  nn::Adam adam(params, 1e-2);

  auto step = [&](const Tensor& x, const Tensor& y) {
    adam.zero_grad();
    const Tensor h = drop(features(x));
    Tensor loss = nn::mean_squared_error(y, head(h));
    loss.backward();
    adam.step();
    return std::pair<Tensor, Tensor>{loss, h};
  };
  auto traced_step = trace(step, {.name = "train_step"});
  Training run;
  for (int i = 0; i < steps; ++i) {
    const Tensor x = rand32(xshape, 100 + i).to(device), y = rand32({8, 1}, 200 + i).to(device);
    const auto [loss, h] = traced ? traced_step(x, y) : step(x, y);
    run.losses.push_back(loss.to(Device::cpu()));
    run.dropped.push_back(h.to(Device::cpu()));
  }
  for (const Tensor& p : params) {
    run.params.push_back(p.to(Device::cpu()));
    run.grads.push_back(p.grad().to(Device::cpu()));
  }
  for (const auto& [name, t] : adam.state()) run.state.push_back(t.to(Device::cpu()));
  if (traced) {
    run.traces = traced_step.stats().traces;
    run.captured = traced_step.function().last_plan()->captured();
  }
  return run;
}

TEST_P(TracedReplay, TrainingStepIsBitwiseTheEagerStep) {
  const Device device = GetParam();
  const int steps = 4;
  const Training eager = train(device, false, steps), traced = train(device, true, steps);
  EXPECT_EQ(traced.traces, 1);
  EXPECT_EQ(traced.captured, device.is_cuda());  // replayed as one CUDA Graph launch
  for (int i = 0; i < steps; ++i) {
    EXPECT_TRUE(bitwise_equal(eager.losses[i], traced.losses[i])) << "loss of step " << i;
    EXPECT_TRUE(bitwise_equal(eager.dropped[i], traced.dropped[i])) << "dropout of step " << i;
  }
  // Each step drew a fresh mask.
  EXPECT_FALSE(bitwise_equal(traced.dropped[0], traced.dropped[1]));
  ASSERT_EQ(eager.params.size(), traced.params.size());
  for (size_t i = 0; i < eager.params.size(); ++i) {
    EXPECT_TRUE(bitwise_equal(eager.params[i], traced.params[i])) << "parameter " << i;
    EXPECT_TRUE(bitwise_equal(eager.grads[i], traced.grads[i])) << "gradient " << i;
  }
  ASSERT_EQ(eager.state.size(), traced.state.size());
  for (size_t i = 0; i < eager.state.size(); ++i)
    EXPECT_TRUE(bitwise_equal(eager.state[i], traced.state[i])) << "optimizer state " << i;
}

// An argument with no reader has no slot in the Plan's memory: binding it must not write
// anywhere (it used to be copied to the byte before the arena).
TEST_P(TracedReplay, ArgumentTheFunctionNeverReads) {
  const Device device = GetParam();
  const Tensor canary = full({4096}, 7.0, DType::Float32, device);
  auto f = trace([](const Tensor& x, const Tensor& unused) {
    (void)unused;
    return x * 2.0;
  });
  for (int i = 1; i <= 3; ++i) {
    const Tensor x = full({64}, i, DType::Float32, device);
    const Tensor unused = full({5, 3}, -1.0, DType::Float32, device);
    expect_values(f(x, unused), std::vector<double>(64, 2.0 * i));
  }
  EXPECT_EQ(f.stats().traces, 1);
  expect_values(canary, std::vector<double>(4096, 7.0));
  expect_values(sum(ones({8}, DType::Float32, device)), {8});
  synchronize(device);
}

// graph/trace.h: alias outputs are views of the Plan's memory that the next replay overwrites;
// copies are not; an alias keeps that memory alive after the cache is cleared.
TEST_P(TracedReplay, AliasOutputsAreOverwrittenByTheNextReplay) {
  const Device device = GetParam();
  auto body = [](const Tensor& x) { return std::pair<Tensor, Tensor>{x * 2.0, sum(x)}; };
  auto alias = trace(body, {.alias_outputs = true});
  auto copy = trace(body);
  const Tensor ones4 = ones({4}, DType::Float32, device),
               fives = full({4}, 5.0, DType::Float32, device);
  alias(ones4);  // the first calls run eagerly (and trace)
  copy(ones4);
  const auto [a1, s1] = alias(ones4);
  const auto [c1, d1] = copy(ones4);
  EXPECT_EQ(a1.device(), device);
  const int64_t before = Ledger::global().get(Counter::Allocations);
  const auto [a2, s2] = alias(fives);
  EXPECT_EQ(Ledger::global().get(Counter::Allocations), before);  // a replay allocates nothing
  copy(fives);
  expect_values(a1, {10, 10, 10, 10});  // overwritten by the second replay
  expect_values(s1, {20});
  EXPECT_EQ(a1.data_ptr(), a2.data_ptr());
  expect_values(c1, {2, 2, 2, 2});
  expect_values(d1, {4});
  alias.function().clear();
  expect_values(a2, {10, 10, 10, 10});
}

INSTANTIATE_TEST_SUITE_P(CudaGraph, TracedReplay, testing::Values(Device::cpu(), kGpu),
                         [](const testing::TestParamInfo<Device>& info) {
                           return std::string(info.param.is_cpu() ? "cpu" : "cuda");
                         });

// A copy from the host inside a traced CUDA function cannot be captured (a replay could not
// read the host again): the trace fails with an error naming the op, and nothing is left
// behind.
TEST(CudaGraphCapture, StepThatCannotBeCapturedIsAClearError) {
  REQUIRE_CUDA();
  const Tensor host_scale = full({4}, 3.0);
  auto f = trace([&](const Tensor& x) { return x * host_scale.to(kGpu); });
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      f(ones({4}, DType::Float32, kGpu));
      ADD_FAILURE() << "a host copy was captured";
    } catch (const UnsupportedError& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind("[capture] to_device", 0), 0u) << what;
      EXPECT_NE(what.find("cannot be captured into a CUDA Graph"), std::string::npos) << what;
    }
  }
  // The runtime is usable: eager ops, and a trace that can be captured.
  expect_values(ones({4}, DType::Float32, kGpu) * 2.0, {2, 2, 2, 2});
  const Tensor scale = host_scale.to(kGpu);
  auto g = trace([&](const Tensor& x) { return x * scale; });
  expect_values(g(ones({4}, DType::Float32, kGpu)), {3, 3, 3, 3});
  EXPECT_TRUE(g.function().last_plan()->captured());
}

// A kernel that allocates while being captured (here a reduction called without its prepared
// scratch buffer) is refused at once, naming the op: an allocation in a graph has no matching
// free and would fail the second replay. With its prepared state the same step captures, and
// replays give the eager result.
TEST(CudaGraphCapture, AllocationDuringCaptureNamesTheOp) {
  REQUIRE_CUDA();
  const int cuda = static_cast<int>(DeviceType::CUDA);
  const Tensor x = rand32({5000}, 3).to(kGpu);
  Tensor y = Tensor::empty({}, DType::Float32, kGpu);
  const Attrs all = ReduceAttrs{1u, false};
  const OpDef& def = op("sum");
  graph::Step step{&def, def.kernels[cuda].run, kGpu, {ref(x)}, {ref(y)}, all, nullptr};
  graph::PlanTimes times;
  try {
    graph::graph_capture(DeviceType::CUDA)({step}, kGpu.index, times);
    ADD_FAILURE() << "an allocation was captured";
  } catch (const UnsupportedError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("[capture] sum", 0), 0u) << what;
    EXPECT_NE(what.find("[sum] allocates"), std::string::npos) << what;
  }
  const Tensor eager = sum(x);
  step.state = def.kernels[cuda].prepare(KernelCtx{step.in, step.out, step.attrs, nullptr});
  const auto graph = graph::graph_capture(DeviceType::CUDA)({step}, kGpu.index, times);
  for (int replay = 0; replay < 2; ++replay) {
    y.fill_(0);
    graph->launch();
    EXPECT_TRUE(bitwise_equal(y, eager)) << "replay " << replay;
  }
}

}  // namespace
}  // namespace encore
