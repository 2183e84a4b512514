// CUDA Graph capture of everything a traced step can hold (issue 27): every op's table example
// captured and replayed equals its eager call bit for bit; cuDNN LSTM and GRU inside a captured
// training step; a function that writes its arguments; one cudaGraphLaunch per replay (the
// ledger's graph_launches); retrace and bucketing on CUDA; eager ops of several threads at once
// (each with its own cuBLAS / cuDNN handles). Skipped without a GPU, except the counter's CPU
// side. tests/gpu/run.sh runs CudaCaptureFirstUse in a process of its own first.
#include <memory>
#include <string>
#include <thread>

#include "core/ledger.h"
#include "graph/trace.h"
#include "helpers.h"
#include "nn/gru.h"
#include "nn/layers.h"
#include "nn/lstm.h"
#include "op_cases.h"
#include "ops/examples.h"

namespace encore {
namespace {

using test::bitwise_equal;
using test::kGpu;
using test::rand32;

constexpr uint64_t kSeed = 4242;

int64_t launches() { return Ledger::global().get(Counter::GraphLaunches); }

// ---- every op's example ------------------------------------------------------------------

// One case per example of every op (the op table's cases).
using Case = test::OpCase;

class CudaCaptureTable : public testing::TestWithParam<Case> {};

// As OpTable.ReplayIsBitwiseTheEagerCall on the CPU: the example, traced on the GPU, is captured
// into a CUDA Graph whose replay (one launch) gives the eager call's outputs bit for bit.
TEST_P(CudaCaptureTable, CapturedReplayIsBitwiseTheEagerCall) {
  REQUIRE_CUDA();
  const OpDef& def = op(GetParam().first);
  const Example& example = def.examples.at(GetParam().second);
  if (!def.runs_on(DeviceType::CUDA)) GTEST_SKIP() << "a CPU fast path";
  std::vector<Tensor> x;
  for (const Tensor& t : example_inputs(example, DType::Float32, Device::cpu()))
    x.push_back(t.to(kGpu));
  manual_seed(kSeed);
  const Outputs eager = run_example(def, example, x, kGpu);
  const std::vector<graph::Arg> args(x.begin(), x.end());
  TracedFunction f([&](const std::vector<graph::Arg>& a) {
    std::vector<Tensor> in;
    for (const graph::Arg& v : a)
      if (const Tensor* t = std::get_if<Tensor>(&v)) in.push_back(*t);
    return run_example(def, example, in, kGpu);
  });
  manual_seed(kSeed);
  (void)f(args);  // runs eagerly, then traces and captures
  ASSERT_TRUE(f.last_plan()->captured()) << def.name;
  manual_seed(kSeed);
  const int64_t before = launches();
  const std::vector<Tensor> replayed = f(args);
  ASSERT_EQ(f.stats().hits, 1) << f.explain();
  EXPECT_EQ(launches() - before, 1) << def.name;
  ASSERT_EQ(replayed.size(), eager.size());
  for (size_t i = 0; i < eager.size(); ++i) {
    EXPECT_EQ(replayed[i].device(), eager[i].device()) << def.name << " output " << i;
    EXPECT_TRUE(bitwise_equal(eager[i], replayed[i])) << def.name << " output " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(EveryOp, CudaCaptureTable, testing::ValuesIn(test::op_cases()),
                         test::op_case_name);

// ---- training steps ----------------------------------------------------------------------

struct Trained {
  std::vector<Tensor> results;  // the losses, then the parameters after the last step
  bool captured = false;
  int64_t traces = 0, replays = 0, launches = 0;  // launches counted over the replays
};

// `steps` Adam steps of the model `make` builds for (4, 7, 3) inputs, on the GPU, eager or
// traced, from one seed.
Trained train_on_gpu(const std::function<void(nn::Sequential&)>& make, bool traced, int steps = 4) {
  manual_seed(7);
  nn::Sequential m;
  make(m);
  m.build({4, 7, 3});
  m.to(kGpu);
  nn::Adam adam(m.parameters(), 1e-2);
  auto step = [&](const Tensor& x, const Tensor& y) {
    adam.zero_grad();
    Tensor loss = nn::mean_squared_error(y, m(x));
    loss.backward();
    adam.step();
    return loss;
  };
  auto traced_step = trace(step, {.name = "gpu_step"});
  Trained run;
  const int64_t replays_before = Ledger::global().get(Counter::Replays);
  int64_t launches_before = 0;
  for (int i = 0; i < steps; ++i) {
    const Tensor x = rand32({4, 7, 3}, 100 + i).to(kGpu), y = rand32({4, 1}, 200 + i).to(kGpu);
    if (i == 1) launches_before = launches();  // the first call runs eagerly and captures
    run.results.push_back((traced ? traced_step(x, y) : step(x, y)).to(Device::cpu()));
  }
  for (const Tensor& p : m.parameters()) run.results.push_back(p.to(Device::cpu()));
  if (traced) {
    run.captured = traced_step.function().last_plan()->captured();
    run.traces = traced_step.stats().traces;
    run.replays = Ledger::global().get(Counter::Replays) - replays_before;
    run.launches = launches() - launches_before;
  }
  return run;
}

void expect_traced_training_is_eager(const std::function<void(nn::Sequential&)>& make) {
  const Trained eager = train_on_gpu(make, false), traced = train_on_gpu(make, true);
  EXPECT_TRUE(traced.captured);
  EXPECT_EQ(traced.traces, 1);
  EXPECT_EQ(traced.replays, 3);
  EXPECT_EQ(traced.launches, 3);  // one cudaGraphLaunch per replayed step
  ASSERT_EQ(eager.results.size(), traced.results.size());
  for (size_t i = 0; i < eager.results.size(); ++i)
    EXPECT_TRUE(bitwise_equal(eager.results[i], traced.results[i]))
        << (i < 4 ? "loss " : "parameter ") << i;
}

TEST(CudaCapture, CudnnLstmTrainingStepIsCapturedAndBitwiseEager) {
  REQUIRE_CUDA();
  nn::LSTM probe(6);
  probe.build({4, 7, 3});
  probe.to(kGpu);
  ASSERT_TRUE(probe.uses_cudnn(rand32({4, 7, 3}).to(kGpu)));
  expect_traced_training_is_eager([](nn::Sequential& m) {
    m.add<nn::LSTM>(6);
    m.add<nn::Dense>(1);
  });
}

TEST(CudaCapture, CudnnGruTrainingStepIsCapturedAndBitwiseEager) {
  REQUIRE_CUDA();
  nn::GRU probe(6);
  probe.build({4, 7, 3});
  probe.to(kGpu);
  ASSERT_TRUE(probe.uses_cudnn(rand32({4, 7, 3}).to(kGpu)));
  expect_traced_training_is_eager([](nn::Sequential& m) {
    m.add<nn::GRU>(6, nn::GRUOptions{.return_sequences = true});
    m.add<nn::GlobalAveragePooling1D>();
    m.add<nn::Dense>(1);
  });
}

// The benchmarks' two shapes of model: Conv1D layers, and Dense layers alone.
TEST(CudaCapture, OneGraphLaunchPerReplayedStep) {
  REQUIRE_CUDA();
  expect_traced_training_is_eager([](nn::Sequential& m) {
    m.add<nn::Conv1D>(8, 3, nn::Conv1DOptions{.padding = "same", .activation = "relu"});
    m.add<nn::Conv1D>(8, 3, nn::Conv1DOptions{.strides = 2, .activation = "tanh"});
    m.add<nn::GlobalAveragePooling1D>();
    m.add<nn::Dense>(1);
  });
  expect_traced_training_is_eager([](nn::Sequential& m) {
    m.add<nn::Flatten>();
    m.add<nn::Dense>(16, nn::DenseOptions{.activation = "relu"});
    m.add<nn::Dense>(1);
  });
}

// In-place writes to arguments reach the caller's tensors after every replay (a written
// argument is copied back from its static slot), a strided one included.
TEST(CudaCapture, FunctionThatWritesItsArgumentsReplays) {
  REQUIRE_CUDA();
  auto body = [](const Tensor& acc, const Tensor& x) {
    Tensor a = acc;
    a.add_(x * 2.0);
    return sum(acc);
  };
  auto f = trace(body);
  const Tensor base = rand32({6, 8}, 1).to(kGpu);
  Tensor eager_acc = base.clone(), traced_acc = base.clone();
  const Tensor eager_big = rand32({8, 6}, 2).to(kGpu), traced_big = eager_big.clone();
  for (int i = 0; i < 4; ++i) {
    const Tensor x = rand32({6, 8}, 10 + i).to(kGpu);
    const Tensor e = body(eager_acc, x), t = f(traced_acc, x);
    EXPECT_TRUE(bitwise_equal(e, t)) << "call " << i;
    EXPECT_TRUE(bitwise_equal(eager_acc, traced_acc)) << "call " << i;
    // A strided view of a larger tensor as the written argument.
    const Tensor ev = eager_big.transpose(0, 1), tv = traced_big.transpose(0, 1);
    body(ev, x);
    f(tv, x);
    EXPECT_TRUE(bitwise_equal(eager_big, traced_big)) << "strided, call " << i;
  }
  EXPECT_EQ(f.stats().traces, 2);  // the contiguous and the strided signature
  EXPECT_TRUE(f.function().last_plan()->captured());
}

// A new shape retraces (and captures again); an old one replays its graph.
TEST(CudaCapture, RetraceOnANewShapeAndReplayOfTheOld) {
  REQUIRE_CUDA();
  manual_seed(3);
  nn::Sequential m;
  m.add<nn::Conv1D>(4, 3, nn::Conv1DOptions{.padding = "same"});
  m.add<nn::GlobalAveragePooling1D>();
  m.build({2, 12, 3});
  m.to(kGpu);
  auto f = trace([&](const Tensor& x) { return m(x); });
  for (int64_t len : {12, 16, 12, 16, 9}) {
    const Tensor x = rand32({2, len, 3}, static_cast<uint64_t>(len)).to(kGpu);
    EXPECT_TRUE(bitwise_equal(m(x), f(x))) << "length " << len;
    EXPECT_TRUE(f.function().last_plan()->captured());
  }
  EXPECT_EQ(f.stats().traces, 3);
  EXPECT_EQ(f.stats().hits, 2);
}

// Bucketing on CUDA: one graph for every length of a bucket (the length is data), equal to the
// eager call on the unpadded input (exact in value; the padded GEMMs sum in another order).
TEST(CudaCapture, BucketedLengthsReplayOneGraph) {
  REQUIRE_CUDA();
  manual_seed(5);
  nn::Sequential m;
  m.add<nn::Conv1D>(4, 3, nn::Conv1DOptions{.padding = "same", .activation = "relu"});
  m.add<nn::LSTM>(5);
  m.add<nn::Dense>(1);
  m.build({2, 10, 3});
  m.to(kGpu);
  auto f = trace([&](const Tensor& x) { return m(x); }, {.shapes = ShapePolicy::bucket(1, {16})});
  int64_t before = 0;
  for (int64_t len : {10, 13, 16, 11}) {
    const Tensor x = rand32({2, len, 3}, static_cast<uint64_t>(len)).to(kGpu);
    if (len == 13) before = launches();  // after the first trace and its probes
    const Tensor eager = m(x), bucketed = f(x);
    ASSERT_EQ(bucketed.shape(), eager.shape()) << "length " << len;
    EXPECT_LT(test::max_abs_diff(eager, bucketed), 1e-5) << "length " << len;
  }
  EXPECT_EQ(f.stats().traces, 1);
  EXPECT_EQ(f.stats().retraces_saved, 3);
  EXPECT_EQ(launches() - before, 3);
  EXPECT_TRUE(f.function().last_plan()->captured());
}

// ---- threads -----------------------------------------------------------------------------

// fit and Module.forward release the GIL, so eager GPU ops run on several threads at once: each
// thread has its own cuBLAS and cuDNN handles (cuDNN allows a handle on one thread at a time).
TEST(CudaCapture, EagerOpsOnSeveralThreadsAtOnce) {
  REQUIRE_CUDA();
  // Built one after the other (the default generator is shared), trained alone or together.
  auto model = [](uint64_t seed) {
    manual_seed(seed);
    auto m = std::make_shared<nn::Sequential>();
    m->add<nn::Conv1D>(8, 3, nn::Conv1DOptions{.padding = "same"});
    m->add<nn::LSTM>(8, nn::LSTMOptions{.return_sequences = true});
    m->add<nn::GRU>(8);
    m->add<nn::Dense>(1);
    m->build({4, 9, 3});
    m->to(kGpu);
    return m;
  };
  auto work = [](nn::Sequential& m, uint64_t seed) {
    std::vector<Tensor> out;
    for (int i = 0; i < 20; ++i) {
      const Tensor x = rand32({4, 9, 3}, seed * 100 + i).to(kGpu);
      Tensor loss = sum(m(x));
      loss.backward();
      out.push_back(loss.to(Device::cpu()));
    }
    for (const Tensor& p : m.parameters()) out.push_back(p.grad().to(Device::cpu()));
    return out;
  };
  constexpr int kThreads = 4;
  std::vector<std::vector<Tensor>> alone, together(kThreads);
  for (uint64_t t = 0; t < kThreads; ++t) alone.push_back(work(*model(t + 1), t + 1));
  std::vector<std::shared_ptr<nn::Sequential>> models;
  for (uint64_t t = 0; t < kThreads; ++t) models.push_back(model(t + 1));
  std::vector<std::thread> threads;
  std::vector<std::string> errors(kThreads);
  for (uint64_t t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      try {
        together[t] = work(*models[t], t + 1);
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  for (std::thread& t : threads) t.join();
  for (size_t t = 0; t < kThreads; ++t) {
    EXPECT_EQ(errors[t], "") << "thread " << t;
    ASSERT_EQ(alone[t].size(), together[t].size()) << "thread " << t;
    for (size_t i = 0; i < alone[t].size(); ++i)
      EXPECT_TRUE(bitwise_equal(alone[t][i], together[t][i])) << "thread " << t << " result " << i;
  }
}

// ---- the process's first CUDA work is a traced step --------------------------------------

// tests/gpu/run.sh runs this in a process of its own, before anything else touches the GPU: the
// capture's cuDNN and cuBLAS handles are then new, and the capture must find them warmed up
// (the prepare functions' warm-ups run on them, joined to the compute stream).
TEST(CudaCaptureFirstUse, ConvolutionAndRecurrentStepsCaptureFirst) {
  REQUIRE_CUDA();
  for (int kind = 0; kind < 3; ++kind) {
    SCOPED_TRACE(kind == 0 ? "conv1d" : kind == 1 ? "cudnn_lstm" : "cudnn_gru");
    const Trained traced = train_on_gpu(
        [kind](nn::Sequential& m) {
          if (kind == 0) m.add<nn::Conv1D>(8, 3, nn::Conv1DOptions{.padding = "same"});
          if (kind == 1) m.add<nn::LSTM>(8);
          if (kind == 2) m.add<nn::GRU>(8);
          if (kind == 0) m.add<nn::GlobalAveragePooling1D>();
          m.add<nn::Dense>(1);
        },
        true);
    EXPECT_TRUE(traced.captured);
    EXPECT_EQ(traced.launches, 3);
  }
}

// ---- the counter -------------------------------------------------------------------------

// graph_launches counts cudaGraphLaunch calls: a CPU Plan replays without one.
TEST(GraphLaunches, CountedByNameAndNotOnTheCpu) {
  EXPECT_EQ(counter_name(Counter::GraphLaunches), "graph_launches");
  auto f = trace([](const Tensor& x) { return x * 2.0; });
  const Tensor x = rand32({16});
  f(x);
  const int64_t replays = Ledger::global().get(Counter::Replays), before = launches();
  for (int i = 0; i < 3; ++i) f(x);
  EXPECT_EQ(Ledger::global().get(Counter::Replays) - replays, 3);
  EXPECT_EQ(launches(), before);
  EXPECT_FALSE(f.function().last_plan()->captured());
  Ledger::global().add(Counter::GraphLaunches, 2);
  EXPECT_NE(Ledger::global().table().find("graph_launches"), std::string::npos);
}

}  // namespace
}  // namespace encore
