// What a traced call must do exactly as an eager call does (issue 8): gradient accumulation,
// backward without a step, writes to captured state and to arguments, static arguments,
// threads, failed traces and runaway recursion. Each test runs the same program eagerly and
// traced and compares bit for bit.
#include <thread>

#include "core/modes.h"
#include "graph/trace.h"
#include "helpers.h"
#include "nn/layers.h"
#include "nn/losses.h"
#include "nn/optim.h"

namespace encore {
namespace {

using test::bitwise_equal;
using test::expect_values;
using test::rand32;

void add_inplace(Tensor t, double v) { t.add_(v); }

bool same_grad(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined()) return a.defined() == b.defined();
  return bitwise_equal(a, b);
}

Tensor parameter(std::initializer_list<double> values, const char* name) {
  Tensor w = tensor(values, {static_cast<int64_t>(values.size())});
  w.set_requires_grad(true);
  w.set_name(name);
  return w;
}

TEST(TraceSemantics, GradientsAccumulateAcrossCallsWithoutZeroGrad) {
  for (bool traced : {false, true}) {
    Tensor w = parameter({1, 1}, "w");
    auto body = [&](const Tensor& x) {
      Tensor loss = sum(w * x);
      loss.backward();
      return loss;
    };
    auto f = trace(body);
    for (int i = 0; i < 3; ++i) traced ? f(full({2}, 3.0)) : body(full({2}, 3.0));
    expect_values(w.grad(), {9, 9});
  }
}

// Four micro-batches per optimizer step, zero_grad outside the traced function.
TEST(TraceSemantics, MicroBatchAccumulationMatchesEager) {
  auto run = [](bool traced) {
    manual_seed(5);
    nn::Dense dense(3);
    dense.build({4, 5});
    nn::Adam adam(dense.parameters(), 0.05);
    auto accumulate = [&](const Tensor& x, const Tensor& y) {
      Tensor loss = nn::mean_squared_error(y, dense(x));
      loss.backward();
      return loss;
    };
    auto traced_accumulate = trace(accumulate);
    std::vector<Tensor> losses;
    for (int step = 0; step < 3; ++step) {
      adam.zero_grad();
      for (int mb = 0; mb < 4; ++mb) {
        const Tensor x = rand32({4, 5}, 10 * step + mb), y = rand32({4, 3}, 100 + 10 * step + mb);
        losses.push_back(traced ? traced_accumulate(x, y) : accumulate(x, y));
      }
      adam.step();
    }
    if (traced) {
      // One graph for "no gradient yet", one for "accumulate", then only replays.
      EXPECT_LE(traced_accumulate.stats().traces, 3);
      EXPECT_GE(traced_accumulate.stats().hits, 8);
    }
    return std::make_pair(dense.parameters(), losses);
  };
  const auto [eager_params, eager_losses] = run(false);
  const auto [traced_params, traced_losses] = run(true);
  for (size_t i = 0; i < eager_params.size(); ++i) {
    EXPECT_TRUE(bitwise_equal(eager_params[i], traced_params[i])) << eager_params[i].name();
    EXPECT_TRUE(same_grad(eager_params[i].grad(), traced_params[i].grad()))
        << eager_params[i].name();
  }
  for (size_t i = 0; i < eager_losses.size(); ++i)
    EXPECT_TRUE(bitwise_equal(eager_losses[i], traced_losses[i])) << i;
}

TEST(TraceSemantics, BackwardWithoutStepKeepsGradients) {
  for (bool optimize : {true, false}) {
    Tensor w = parameter({1, 2}, "w");
    auto f = trace(
        [&](const Tensor& x) {
          w.set_grad(Tensor());
          sum(w * x * x).backward();
        },
        {.optimize = optimize});
    for (double v : {1.0, 2.0, 3.0}) {
      f(full({2}, v));
      expect_values(w.grad(), {v * v, v * v});
    }
    EXPECT_EQ(f.stats().traces, 1);
  }
}

TEST(TraceSemantics, WritesToCapturedTensorsReachThem) {
  Tensor s = zeros({2}), counter = zeros({}, DType::Int64);
  auto f = trace([&](const Tensor& x) {
    s.copy_(x * 2.0);
    add_inplace(counter, 1.0);
    return x + 1.0;
  });
  for (double v : {1.0, 2.0, 5.0}) {
    f(full({2}, v));
    expect_values(s, {2 * v, 2 * v});
  }
  EXPECT_EQ(counter.item(), 3);
  EXPECT_EQ(f.stats().traces, 1);
}

TEST(TraceSemantics, WritesToArgumentsReachTheCallerContiguousOrStrided) {
  auto f = trace([](const Tensor& x) {
    add_inplace(x, 1.0);
    return x * 2.0;
  });
  for (int call = 0; call < 3; ++call) {
    Tensor base = tensor({1, 2, 3, 4, 5, 6}, {2, 3});
    const Tensor out = f(base.transpose(0, 1));  // strided: read and written where it is
    expect_values(base, {2, 3, 4, 5, 6, 7});
    expect_values(out, {4, 10, 6, 12, 8, 14});
    Tensor dense = tensor({1, 2, 3, 4, 5, 6}, {3, 2});
    f(dense);
    expect_values(dense, {2, 3, 4, 5, 6, 7});
  }
  EXPECT_EQ(f.stats().traces, 2);  // the layout is part of the signature
}

TEST(TraceSemantics, AliasedWrittenArgumentsAreAnError) {
  Tensor w = ones({2});
  w.set_name("w");
  auto both = trace([](const Tensor& a, const Tensor& b) {
    add_inplace(a, 1.0);
    return a + b;
  });
  Tensor x = ones({2});
  both(x, x);  // the eager first call is exact
  expect_values(x, {2, 2});
  try {
    both(x, x);
    FAIL() << "no error";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("share memory"), std::string::npos) << e.what();
  }
  auto update = trace([&](const Tensor& a) {
    add_inplace(w, 1.0);
    return a * 2.0;
  });
  update(ones({2}));
  EXPECT_THROW(update(w), ValueError);       // w is written by the function
  expect_values(update(ones({2})), {2, 2});  // still usable
}

TEST(TraceSemantics, StaticFloatsCompareByBits) {
  auto f = trace([](const Tensor& x, double d) { return x / full({}, d); });
  const Tensor x = ones({1});
  EXPECT_EQ(f(x, 0.0).item(), INFINITY);
  EXPECT_EQ(f(x, -0.0).item(), -INFINITY);
  EXPECT_EQ(f(x, 0.0).item(), INFINITY);
  EXPECT_EQ(f(x, -0.0).item(), -INFINITY);
  EXPECT_EQ(f.stats().traces, 2);
  const double nan = std::nan("");
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(std::isnan(f(x, nan).item()));
  EXPECT_EQ(f.stats().traces, 3);  // NaN matches itself
}

TEST(TraceSemantics, ThreadsTrainingOneModelDoNotInterleave) {
  auto train = [](int threads, int steps_each) {
    manual_seed(7);
    nn::Dense dense(4);
    dense.build({8, 6});
    nn::SGD sgd(dense.parameters(), 0.01);
    const Tensor x = rand32({8, 6}, 1), y = rand32({8, 4}, 2);
    auto step = trace([&](const Tensor& xb, const Tensor& yb) {
      sgd.zero_grad();
      Tensor loss = nn::mean_squared_error(yb, dense(xb));
      loss.backward();
      sgd.step();
      return loss;
    });
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&] {
        for (int i = 0; i < steps_each; ++i) step(x, y);
      });
    for (std::thread& t : pool) t.join();
    return dense.parameters();
  };
  // Every step applies the same batch: any order of whole steps gives the same weights.
  const auto serial = train(1, 600), threaded = train(3, 200);
  for (size_t i = 0; i < serial.size(); ++i)
    EXPECT_TRUE(bitwise_equal(serial[i], threaded[i])) << serial[i].name();
}

TEST(TraceSemantics, FailedTraceLeavesGradientsAsTheyWere) {
  Tensor w = parameter({1, 2}, "w");
  auto f = trace([&](const Tensor& x) {
    Tensor loss = sum(w * x);
    loss.backward();
    (void)loss.item();  // an error inside the trace, after backward assigned .grad
    return loss;
  });
  EXPECT_THROW(f(ones({2})), ValueError);
  // The eager first call set the gradient; the failed trace put it back, not zeros.
  expect_values(w.grad(), {1, 1});
  w.set_grad(Tensor());
  EXPECT_THROW(f(ones({2})), ValueError);
  expect_values(w.grad(), {1, 1});
}

TEST(TraceSemantics, PrintingInsideATraceIsAnError) {
  const Tensor outside = ones({2});
  auto f = trace([&](const Tensor& x) {
    (void)outside.str();
    return x;
  });
  EXPECT_THROW(f(ones({1})), ValueError);
}

TEST(TraceSemantics, GradientsOfArgumentsAreRejectedNotDropped) {
  auto f = trace([](const Tensor& x) {
    Tensor loss = sum(x * x);
    loss.backward();
    return loss;
  });
  Tensor x = ones({2});
  x.set_requires_grad(true);
  try {
    f(x);
    FAIL() << "no error";
  } catch (const UnsupportedError& e) {
    EXPECT_NE(std::string(e.what()).find("argument 0"), std::string::npos) << e.what();
  }
}

TEST(TraceSemantics, ConstantsMadeInsideAreFreshEveryCall) {
  auto body = [](const Tensor& x) {
    Tensor t = from_vector<float>({1, 2}, {2});  // host data: a constant of the graph
    t.add_(x);
    return t;
  };
  auto f = trace(body);
  for (int i = 0; i < 3; ++i) expect_values(f(ones({2})), {2, 3});
}

TEST(TraceSemantics, RunawayRecursionIsAnError) {
  std::function<Tensor(const Tensor&)> self;
  auto f = trace([&](const Tensor& x) { return self(x) + 1.0; });
  self = [&](const Tensor& x) { return f(x); };
  try {
    f(ones({1}));
    FAIL() << "no error";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("nested more than"), std::string::npos) << e.what();
  }
  expect_values(ones({1}) + 1.0, {2});
}

TEST(TraceSemantics, UnusedArgumentsAreFine) {
  auto f = trace([](const Tensor& x, const Tensor&) { return x * 2.0; });
  for (int i = 0; i < 3; ++i) expect_values(f(ones({2}), ones({5})), {2, 2});
}

}  // namespace
}  // namespace encore
