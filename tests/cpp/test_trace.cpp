// Tracing: symbolic recording, graph IR and passes, memory plan, replay, the signature
// cache and its explanations, shape policies, randomness, and eager/traced equivalence.
#include "core/ledger.h"
#include "core/modes.h"
#include "core/threads.h"
#include "graph/trace.h"
#include "helpers.h"
#include "nn/layers.h"
#include "nn/losses.h"
#include "nn/lstm.h"
#include "nn/optim.h"
#include "ops/prepared.h"

namespace encore {
namespace {

using test::bitwise_equal;
using test::expect_values;
using test::rand32;

TEST(Trace, FirstCallRunsEagerlyThenTracesWithoutRunningKernels) {
  std::vector<bool> symbolic;  // one entry per run of the body
  std::vector<int64_t> dispatched;
  auto f = trace([&](const Tensor& x) {
    const int64_t before = Ledger::global().get(Counter::OpsDispatched);
    Tensor y = exp(x) * 2.0;
    dispatched.push_back(Ledger::global().get(Counter::OpsDispatched) - before);
    symbolic.push_back(y.is_symbolic());
    return y;
  });
  const Tensor x = rand32({3});
  EXPECT_LT(test::max_abs_diff(f(x), exp(x) * 2.0), 1e-7);
  EXPECT_EQ(symbolic, (std::vector<bool>{false, true}));  // eager, then the trace
  EXPECT_EQ(dispatched, (std::vector<int64_t>{2, 0}));    // no kernel ran while tracing
  EXPECT_LT(test::max_abs_diff(f(x * 3.0), exp(x * 3.0) * 2.0), 1e-6);
  EXPECT_EQ(symbolic.size(), 2u);  // replayed: the body did not run
  EXPECT_EQ(f.stats().eager_calls, 1);
  EXPECT_EQ(f.stats().traces, 1);
  EXPECT_EQ(f.stats().hits, 1);

  auto reads = trace([](const Tensor& x) {
    (void)sum(x).item();
    return x;
  });
  try {
    reads(x);
    FAIL() << "no error";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("[item] cannot read the value"), std::string::npos)
        << e.what();
  }
  // The failed trace left nothing behind: eager ops work and a new trace succeeds.
  expect_values(ones({1}) + 1.0, {2});
  EXPECT_EQ(f(x).shape(), x.shape());
}

TEST(Trace, SymbolicTensorsDoNotEscape) {
  Tensor leaked;
  auto f = trace([&](const Tensor& x) {
    leaked = x * 2.0;
    return x + 1.0;
  });
  try {
    f(ones({2}));
    FAIL() << "no error";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "keeps a tensor made inside the trace (the result of mul_scalar"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(leaked + 1.0, ValueError);
  EXPECT_THROW(leaked.item(), ValueError);
}

TEST(Trace, GraphTextDotAndDeadCodeElimination) {
  auto f = trace(
      [](const Tensor& x) {
        (void)exp(x);  // unused: removed
        return relu(x) * 3.0;
      },
      {.name = "f", .arg_names = {"x"}});
  f(rand32({2, 2}));
  const graph::Plan* plan = f.function().last_plan();
  ASSERT_NE(plan, nullptr);
  const std::string text = plan->graph().str();
  EXPECT_NE(text.find("relu(x)"), std::string::npos) << text;
  EXPECT_EQ(text.find("exp("), std::string::npos) << text;
  EXPECT_EQ(plan->graph().count("relu"), 1);
  EXPECT_EQ(f.stats().records[0].nodes_removed, 1);
  const std::string dot = plan->graph().dot();
  EXPECT_NE(dot.find("digraph"), std::string::npos);
  EXPECT_NE(dot.find("relu"), std::string::npos);
}

TEST(Trace, MemoryPlanReusesBuffersAndReplaysAllocateNothing) {
  // A chain of elementwise ops: every intermediate dies right after its use.
  auto chain = [](const Tensor& x) {
    Tensor h = x;
    for (int i = 0; i < 10; ++i) h = tanh(h) + 1.0;
    return h;
  };
  auto f = trace(chain, {.alias_outputs = true});
  const Tensor x = rand32({64, 64});
  f(x);
  const TraceRecord& r = f.stats().records[0];
  EXPECT_EQ(r.intermediate_bytes, 20u * 64 * 64 * 4);
  EXPECT_LE(r.arena_bytes, 3u * 64 * 64 * 4);  // a few buffers, reused
  EXPECT_LE(r.peak_live_bytes, r.arena_bytes);
  const int64_t before = Ledger::global().get(Counter::Allocations);
  for (int i = 0; i < 5; ++i) f(x);
  EXPECT_EQ(Ledger::global().get(Counter::Allocations), before);  // alias mode: nothing
  EXPECT_LT(test::max_abs_diff(f(x), chain(x)), 1e-6);

  auto g = trace(chain);  // copy mode: one allocation per output and replay
  g(x);
  const int64_t before_copy = Ledger::global().get(Counter::Allocations);
  for (int i = 0; i < 5; ++i) g(x);
  EXPECT_EQ(Ledger::global().get(Counter::Allocations), before_copy + 5);
}

TEST(Trace, AliasOutputsAreOverwrittenCopiesAreNot) {
  auto alias = trace([](const Tensor& x) { return x * 2.0; }, {.alias_outputs = true});
  auto copy = trace([](const Tensor& x) { return x * 2.0; });
  alias(ones({2}));  // the first calls run eagerly: their results are ordinary tensors
  copy(ones({2}));
  const Tensor a1 = alias(ones({2})), c1 = copy(ones({2}));
  alias(full({2}, 5.0));
  copy(full({2}, 5.0));
  expect_values(a1, {10, 10});  // the next replay overwrote it
  expect_values(c1, {2, 2});
  // An alias output keeps the Plan's memory alive after the cache is cleared.
  alias.function().clear();
  expect_values(a1, {10, 10});
}

TEST(Trace, ParametersAreCapturedByReference) {
  Tensor w = ones({2});
  w.set_name("w");
  auto f = trace([&](const Tensor& x) { return x * w; });
  expect_values(f(ones({2})), {1, 1});
  w.fill_(3);  // in place: no retrace, the replay reads the new values
  expect_values(f(ones({2})), {3, 3});
  EXPECT_EQ(f.stats().traces, 1);
  w.set_data(full({2}, 7.0));  // new storage: detected, retraced
  expect_values(f(ones({2})), {7, 7});
  EXPECT_EQ(f.stats().traces, 2);
  EXPECT_NE(f.stats().records[1].reason.find("storage of captured tensor 'w' was replaced"),
            std::string::npos)
      << f.stats().records[1].reason;
}

TEST(Trace, ParametersBuiltDuringTheFirstTraceAreChecked) {
  manual_seed(2);
  nn::Dense dense(2);  // built lazily, inside the first trace
  auto f = trace([&](const Tensor& x) { return dense(x); });
  const Tensor x = ones({1, 3});
  const Tensor before = f(x);
  for (Tensor& p : dense.parameters()) p.set_data(full(p.shape(), 0.5));
  expect_values(f(x), {2, 2});  // 3 * 0.5 + 0.5
  EXPECT_EQ(f.stats().traces, 2);
  EXPECT_NE(f.stats().records[1].reason.find("'kernel' was replaced"), std::string::npos)
      << f.stats().records[1].reason;
}

TEST(Trace, RetraceCountingAndExplanations) {
  auto f = trace([](const Tensor& x, int64_t k) { return sum(x, {1}) * static_cast<double>(k); },
                 {.name = "f", .arg_names = {"x", "k"}});
  const std::vector<std::pair<int64_t, int64_t>> calls = {{10, 2}, {10, 2}, {12, 2}, {10, 2},
                                                          {12, 2}, {14, 2}, {14, 3}};
  for (auto [len, k] : calls) {
    const Tensor x = ones({2, len});
    expect_values(f(x, k), {static_cast<double>(len * k), static_cast<double>(len * k)});
  }
  const TraceStats& s = f.stats();
  EXPECT_EQ(s.calls, 7);
  EXPECT_EQ(s.traces, 4);
  EXPECT_EQ(s.hits, 3);
  EXPECT_EQ(s.records[0].reason, "first call");
  EXPECT_EQ(s.records[1].call, 3);
  EXPECT_NE(s.records[1].reason.find("arg 0 (x): shape (2, 10) -> (2, 12), axis 1: 10 -> 12"),
            std::string::npos)
      << s.records[1].reason;
  EXPECT_NE(s.records[3].reason.find("arg 1 (k): 2 -> 3"), std::string::npos)
      << s.records[3].reason;
  EXPECT_NE(f.explain().find("trace 3 (call 6)"), std::string::npos) << f.explain();
  EXPECT_NE(s.table("f").find("first call"), std::string::npos);
}

TEST(Trace, ModesArePartOfTheKey) {
  auto f = trace([](const Tensor& x) { return dropout(x, 0.5, training()); });
  const Tensor x = ones({8});
  f(x);
  {
    TrainingGuard eval(false);
    expect_values(f(x), std::vector<double>(8, 1.0));  // retraced without dropout
  }
  {
    NoGradGuard no_grad;
    f(x);
  }
  EXPECT_EQ(f.stats().traces, 3);
  EXPECT_NE(f.stats().records[1].reason.find("training on -> off"), std::string::npos);
  EXPECT_NE(f.stats().records[2].reason.find("grad mode on -> off"), std::string::npos);
}

// The CPU thread count is part of the key, for the graph and for the per-shape kernel state: a
// oneDNN primitive runs the team it was made for, so a Plan or a state made on 2 threads would
// go on using 2 after set_num_threads(1) (and, in a forked child, wait for workers that do not
// exist). The retrace says so; each count gets the eager values.
TEST(Trace, ThreadCountIsPartOfTheKey) {
  const int before = num_threads();
  const Tensor x = test::rand32({4, 50, 8}), w = test::rand32({5, 8, 16});
  auto f = trace([&](const Tensor& in) { return conv1d(in, w); });
  clear_prepared();  // counted below: earlier tests must not have filled the cache
  set_num_threads(2);
  (void)conv1d(x, w);
  for (int n : {1, 2}) {
    set_num_threads(n);
    const size_t states = prepared_size();
    const Tensor eager = conv1d(x, w);
    EXPECT_EQ(prepared_size(), states + (n == 1))
        << "a state for 1 thread, the first one's again for 2";
    EXPECT_TRUE(test::bitwise_equal(f(x), eager)) << n << " threads";
  }
  EXPECT_EQ(f.stats().traces, 2);
  EXPECT_EQ(f.stats().records[1].reason, "new signature: cpu threads 1 -> 2");
  set_num_threads(before);
}

TEST(Trace, LruEvictionAndRetraceWarning) {
  std::vector<std::string> warnings;
  auto f = trace([](const Tensor& x) { return x + 1.0; },
                 {.max_cached = 2, .retrace_warning = 3, .on_warning = [&](const std::string& m) {
                    warnings.push_back(m);
                  }});
  for (int64_t n : {1, 2, 3, 1, 2, 3}) f(ones({n}));
  EXPECT_EQ(f.stats().traces, 6);  // alternating among 3 shapes with room for 2
  EXPECT_EQ(f.stats().evictions, 4);
  EXPECT_EQ(f.function().cache_size(), 2u);
  ASSERT_EQ(warnings.size(), 1u);  // once
  EXPECT_NE(warnings[0].find("traced 4 times"), std::string::npos) << warnings[0];
}

TEST(Trace, ByteBudgetEvictsAndTheRetraceSaysSo) {
  auto body = [](const Tensor& x) { return exp(x) * 2.0 + 1.0; };
  auto probe = trace(body);
  probe(ones({256}));
  const size_t one = probe.function().cached_bytes();
  ASSERT_GT(one, 0u);
  auto f = trace(body, {.max_cached_bytes = one + one / 2});  // room for one graph of this size
  f(ones({256}));
  EXPECT_EQ(f.function().cached_bytes(), one);
  f(ones({255}));  // a second graph: the first is evicted
  EXPECT_EQ(f.function().cache_size(), 1u);
  EXPECT_LE(f.function().cached_bytes(), one);
  EXPECT_EQ(f.stats().evictions, 1);
  f(ones({256}));
  const TraceRecord& r = f.stats().records.back();
  ASSERT_EQ(r.causes.size(), 1u);
  EXPECT_EQ(r.causes[0].kind, RetraceCause::Kind::Eviction);
  EXPECT_NE(r.reason.find("evicted earlier"), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find(std::to_string(one + one / 2) + " bytes"), std::string::npos) << r.reason;
}

// A graph of a signature was evicted while another graph of it remains but cannot serve (its
// captured gradient is gone): the evicted one would have served, so the retrace names the
// eviction (fuzzer program 161:3407). An evicted graph that would not have served is not named.
TEST(Trace, RetraceNamesAnEvictionAlsoWhenAnotherGraphOfTheSignatureRemains) {
  Tensor w = ones({3}).set_requires_grad();
  nn::SGD sgd({w}, 0.5);
  auto f = trace(
      [&](const Tensor& x) {
        sgd.step();
        return x * 2.0;
      },
      {.max_cached = 2});
  const Tensor x = ones({2});
  f(x);  // w.grad None
  {
    NoGradGuard no_grad;
    f(x);
  }
  sum(w * 2.0).backward();
  f(x);  // w.grad set: a second graph of the first signature; the first one is evicted
  EXPECT_EQ(f.stats().evictions, 1);
  sgd.zero_grad();  // the gradient the graph captured is gone
  f(x);
  const TraceRecord& r = f.stats().records.back();
  ASSERT_EQ(r.causes.size(), 1u) << r.reason;
  EXPECT_EQ(r.causes[0].kind, RetraceCause::Kind::Eviction) << r.reason;
  EXPECT_EQ(r.reason, "signature evicted earlier (the cache holds 2 graphs)");

  sum(w * 2.0).backward();  // the graph just traced, and the evicted one, read a None gradient
  f(x);
  const TraceRecord& guarded = f.stats().records.back();
  ASSERT_EQ(guarded.causes.size(), 1u) << guarded.reason;
  EXPECT_EQ(guarded.causes[0].kind, RetraceCause::Kind::GradState) << guarded.reason;
}

// Of the graphs of a signature that cannot serve a call, the most recently used one explains
// the retrace: dropping one parameter's gradient names that (its captured gradient is gone), not
// the state of the oldest graph (traced when every gradient was None). An unnamed gradient is
// named by its parameter.
TEST(Trace, TheMostRecentlyUsedGraphExplainsTheRetrace) {
  Tensor a = ones({3}).set_requires_grad(), b = ones({3}).set_requires_grad();
  a.set_name("a");
  b.set_name("b");
  nn::SGD sgd({a, b}, 0.5);
  auto f = trace([&](const Tensor& x) {
    sum(a * x + b * x).backward();
    sgd.step();
    return x * 1.0;
  });
  const Tensor x = ones({3});
  f(x);  // traced with both gradients None
  f(x);  // both set: traced again
  ASSERT_EQ(f.stats().traces, 2);
  b.set_grad(Tensor());
  f(x);
  const TraceRecord& r = f.stats().records.back();
  ASSERT_EQ(r.causes.size(), 1u) << r.reason;
  EXPECT_EQ(r.causes[0].kind, RetraceCause::Kind::CapturedGone) << r.reason;
  EXPECT_EQ(r.reason, "captured tensor 'b.grad' no longer exists");  // named by its parameter
}

TEST(Trace, StatsTableReportsBreakEven) {
  auto f = trace([](const Tensor& x) { return exp(x) * 2.0; });
  for (int i = 0; i < 4; ++i) f(ones({8}));
  EXPECT_GT(f.stats().eager_ns, 0);
  EXPECT_NE(f.stats().break_even_replays(), 0);
  EXPECT_NE(f.stats().table("f").find("break-even"), std::string::npos) << f.stats().table("f");
}

TEST(Trace, BucketPolicyMatchesEagerForLengthEquivariantFunctions) {
  manual_seed(3);
  const Tensor w1 = rand32({3, 2, 4}, 1), w2 = rand32({5, 4, 3}, 2);
  // Two 'valid' convolutions: output step t depends on input steps t..t+6 only.
  auto body = [&](const Tensor& x) { return conv1d(relu(conv1d(x, w1)), w2); };
  auto f = trace(body, {.shapes = ShapePolicy::bucket(1, {16, 32})});
  for (int64_t len : {9, 12, 16, 20, 31, 40}) {
    const Tensor x = rand32({2, len, 2}, 10 + len);
    const Tensor eager = body(x), traced = f(x);
    ASSERT_EQ(traced.shape(), eager.shape()) << len;
    EXPECT_LT(test::max_abs_diff(traced, eager), 1e-5) << len;
  }
  EXPECT_EQ(f.stats().traces, 3);  // buckets 16 and 32, and 40 traced exactly
  EXPECT_NE(f.stats().records[2].reason.find("exceeds the largest bucket 32"), std::string::npos);
  // Pooling over the padded axis would see the padding: refused (tests/cpp/test_bucket.cpp).
  auto pooled =
      trace([](const Tensor& x) { return mean(x, {1}); }, {.shapes = ShapePolicy::bucket(1, {16})});
  EXPECT_THROW(pooled(rand32({2, 9, 2}, 5)), ValueError);
}

TEST(Trace, DropoutDrawsFreshMasksMatchingEager) {
  auto body = [](const Tensor& x) { return dropout(x, 0.5, true); };
  auto f = trace(body);
  const Tensor x = ones({64});
  manual_seed(9);
  const Tensor e1 = body(x), e2 = body(x);
  manual_seed(9);
  const Tensor t1 = f(x), t2 = f(x);
  EXPECT_TRUE(bitwise_equal(t1, e1));
  EXPECT_TRUE(bitwise_equal(t2, e2));
  EXPECT_FALSE(bitwise_equal(t1, t2));
}

TEST(Trace, NestedTracedFunctionsInline) {
  auto inner = trace([](const Tensor& x) { return x * 2.0; });
  auto outer = trace([&](const Tensor& x) { return inner(x) + 1.0; });
  expect_values(outer(ones({2})), {3, 3});
  // The eager first call of outer called inner as a traced function of its own; the trace of
  // outer recorded inner's ops inline.
  EXPECT_EQ(inner.stats().calls, 1);
  EXPECT_EQ(outer.function().last_plan()->graph().count("mul_scalar"), 1);
  expect_values(outer(full({2}, 2.0)), {5, 5});
  EXPECT_EQ(inner.stats().calls, 1);
}

TEST(Trace, ArgumentErrors) {
  auto f = trace([](const Tensor& x) { return x; });
  EXPECT_THROW(f.function()({}), ValueError);
  EXPECT_THROW(f.function()({int64_t{3}}), DTypeError);
  auto g = trace([](const Tensor&) { return Tensor(); });
  EXPECT_THROW(g(ones({1})), ValueError);
}

TEST(Trace, InferenceWithoutGrad) {
  manual_seed(4);
  nn::Dense dense(3);
  dense.build({2, 4});
  auto predict = trace([&](const Tensor& x) { return dense(x); });
  NoGradGuard no_grad;
  const Tensor x = rand32({2, 4});
  EXPECT_TRUE(bitwise_equal(predict(x), dense(x)));
  EXPECT_FALSE(predict(x).requires_grad());
}

TEST(Trace, LedgerCountsAndChromeTrace) {
  Ledger& l = Ledger::global();
  const int64_t traces = l.get(Counter::Traces), replays = l.get(Counter::Replays);
  l.set_profiling(true);
  auto f = trace([](const Tensor& x) { return relu(x); }, {.name = "profiled"});
  for (int i = 0; i < 3; ++i) f(ones({4}));
  l.set_profiling(false);
  EXPECT_EQ(l.get(Counter::Traces), traces + 1);
  EXPECT_EQ(l.get(Counter::Replays), replays + 2);  // the first call ran eagerly
  EXPECT_GT(l.get(Counter::TraceNs), 0);
  const std::string json = l.chrome_trace_json();
  EXPECT_NE(json.find("\"traceEvents\""), std::string::npos);
  EXPECT_NE(json.find("\"name\":\"profiled\",\"cat\":\"replay\""), std::string::npos);
  EXPECT_NE(l.table().find("replays"), std::string::npos);
}

// N training steps eager and traced from the same initial weights and seed.
struct Run {
  std::vector<Tensor> params;
  std::vector<double> losses;
};

template <class Build>
Run train(Build build, const Shape& xshape, bool traced, int steps, bool sgd = false) {
  manual_seed(0);
  auto model = build();
  model->build(xshape);
  std::unique_ptr<nn::Optimizer> opt;
  if (sgd)
    opt = std::make_unique<nn::SGD>(model->parameters(), 0.05,
                                    nn::SGDOptions{.momentum = 0.9, .nesterov = true});
  else
    opt = std::make_unique<nn::Adam>(model->parameters(), 1e-2);
  auto step_fn = [&](const Tensor& x, const Tensor& y) {
    opt->zero_grad();
    Tensor loss = nn::mean_squared_error(y, (*model)(x));
    loss.backward();
    opt->step();
    return loss;
  };
  auto traced_step = trace(step_fn);
  manual_seed(1);
  Run run;
  for (int i = 0; i < steps; ++i) {
    const Tensor x = rand32(xshape, 100 + i);
    Shape ys = model->output_shape();
    const Tensor y = rand32(ys, 200 + i);
    run.losses.push_back((traced ? traced_step(x, y) : step_fn(x, y)).item());
  }
  if (traced) {
    EXPECT_EQ(traced_step.stats().traces, 1);
  }
  run.params = model->parameters();
  return run;
}

void expect_identical(const Run& eager, const Run& traced) {
  ASSERT_EQ(eager.params.size(), traced.params.size());
  for (size_t i = 0; i < eager.params.size(); ++i) {
    EXPECT_TRUE(bitwise_equal(eager.params[i], traced.params[i])) << eager.params[i].name();
    EXPECT_TRUE(bitwise_equal(eager.params[i].grad(), traced.params[i].grad()))
        << eager.params[i].name();
  }
  EXPECT_EQ(eager.losses, traced.losses);
}

TEST(Equivalence, BinaryCrossentropyOfASigmoidUsesTheLogitsWhenTraced) {
  const Tensor y = from_vector<float>({0, 1, 1, 0}, {4});
  auto run = [&](bool traced) {
    Tensor w = from_vector<float>({20, -20, 0.5, -3}, {4}).set_requires_grad();
    nn::SGD sgd({w}, 1.0);
    auto step = [&](const Tensor& t) {
      sgd.zero_grad();
      Tensor loss = nn::binary_crossentropy(t, sigmoid(w));
      loss.backward();
      sgd.step();
      return loss;
    };
    auto traced_step = trace(step);
    const Tensor loss = traced ? traced_step(y) : step(y);
    if (traced) {
      const graph::Graph& g = traced_step.function().last_plan()->graph();
      EXPECT_EQ(g.count("binary_crossentropy_logits"), 1) << g.str();
      EXPECT_EQ(g.count("binary_crossentropy_logits_grad"), 1) << g.str();
      EXPECT_EQ(g.count("clip") + g.count("log"), 0) << g.str();
    }
    return std::pair{loss, w};
  };
  const auto [eager_loss, eager_w] = run(false);
  const auto [traced_loss, traced_w] = run(true);
  EXPECT_TRUE(bitwise_equal(eager_loss, traced_loss));
  EXPECT_TRUE(bitwise_equal(eager_w, traced_w));
  // The saturated outputs moved: gradient (sigmoid(w) - y) / 4 = 0.25 and -0.25, not 0.
  expect_values(traced_w.slice(0, 0, 2), {19.75, -19.75});
}

TEST(Equivalence, SmallConvModelBitwise) {
  auto build = [] {
    auto m = std::make_shared<nn::Sequential>();
    m->add<nn::Conv1D>(16, 8, nn::Conv1DOptions{.strides = 4, .padding = "same"});
    m->add<nn::GlobalAveragePooling1D>();
    m->add<nn::Dropout>(0.5);
    m->add<nn::Dense>(8, nn::DenseOptions{.activation = "relu"});
    m->add<nn::Dense>(1, nn::DenseOptions{.activation = "sigmoid"});
    return m;
  };
  expect_identical(train(build, {8, 28, 6}, false, 6), train(build, {8, 28, 6}, true, 6));
}

// Conv1D's bias and activation run as the convolution's epilogue (conv1d_fused: one node, no
// add or activation nodes), eagerly and traced alike; sigmoid follows a linear epilogue as its
// own node so that binary_crossentropy sees its logits.
TEST(Equivalence, FusedConvStackBitwise) {
  auto build = [] {
    auto m = std::make_shared<nn::Sequential>();
    m->add<nn::Conv1D>(32, 5, nn::Conv1DOptions{.padding = "same", .activation = "relu"});
    m->add<nn::Conv1D>(24, 3, nn::Conv1DOptions{.activation = "tanh"});
    m->add<nn::Conv1D>(16, 3, nn::Conv1DOptions{.strides = 2});
    m->add<nn::Conv1D>(1, 3, nn::Conv1DOptions{.activation = "sigmoid"});
    m->add<nn::GlobalAveragePooling1D>();
    return m;
  };
  expect_identical(train(build, {4, 30, 8}, false, 4), train(build, {4, 30, 8}, true, 4));
  auto model = build();
  auto step = trace([&](const Tensor& x) { return (*model)(x); });
  (void)step(test::rand32({4, 30, 8}, 3));
  (void)step(test::rand32({4, 30, 8}, 4));
  const graph::Graph& g = step.function().last_plan()->graph();
  EXPECT_EQ(g.count("conv1d_fused"), 4) << g.str();
  EXPECT_EQ(g.count("conv1d"), 0) << g.str();
  EXPECT_EQ(g.count("sigmoid"), 1) << g.str();
  EXPECT_EQ(g.count("add") + g.count("relu") + g.count("tanh"), 0) << g.str();
}

// Dense's bias and activation run as the GEMM's epilogue (dense: one node per layer), eagerly
// and traced alike; sigmoid follows as its own node, as in Conv1D.
TEST(Equivalence, FusedDenseStackBitwise) {
  auto build = [] {
    auto m = std::make_shared<nn::Sequential>();
    m->add<nn::Dense>(
        512, nn::DenseOptions{.activation = "relu"});  // 2^20+ multiply-adds: oneDNN's matmul
    m->add<nn::Dense>(16, nn::DenseOptions{.activation = "tanh"});
    m->add<nn::Dense>(8);
    m->add<nn::Dense>(1, nn::DenseOptions{.activation = "sigmoid"});
    return m;
  };
  expect_identical(train(build, {64, 40}, false, 4), train(build, {64, 40}, true, 4));
  auto model = build();
  auto step = trace([&](const Tensor& x) { return (*model)(x); });
  (void)step(test::rand32({64, 40}, 3));
  (void)step(test::rand32({64, 40}, 4));
  const graph::Graph& g = step.function().last_plan()->graph();
  EXPECT_EQ(g.count("dense"), 4) << g.str();
  EXPECT_EQ(g.count("matmul") + g.count("add"), 0) << g.str();
  EXPECT_EQ(g.count("sigmoid"), 1) << g.str();
}

TEST(Equivalence, DenseModelBitwiseWithSgdNesterov) {
  auto build = [] {
    auto m = std::make_shared<nn::Sequential>();
    m->add<nn::Dense>(16, nn::DenseOptions{.activation = "tanh"});
    m->add<nn::Dense>(4);
    return m;
  };
  expect_identical(train(build, {16, 5}, false, 8, true), train(build, {16, 5}, true, 8, true));
}

TEST(Equivalence, LstmModelBitwise) {
  auto build = [] {
    auto m = std::make_shared<nn::Sequential>();
    m->add(std::make_shared<nn::Bidirectional>(
        std::make_shared<nn::LSTM>(6, nn::LSTMOptions{.activation = "relu"})));
    m->add<nn::Dense>(1);
    return m;
  };
  expect_identical(train(build, {4, 7, 3}, false, 5), train(build, {4, 7, 3}, true, 5));
}

}  // namespace
}  // namespace encore
