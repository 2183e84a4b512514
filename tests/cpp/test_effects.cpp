// The effects rule (graph/effects.h, docs/ARCHITECTURE.md "Effects"), checked with a test-only op
// whose row says `external_effect` and whose kernel counts its runs: it runs exactly once per
// call, eager or traced (the call that traces runs it once, eagerly; tracing runs nothing), is
// never removed by a pass, and never runs in a probe (a bucket's exactness probes, the retrace
// warning's probe): a probe runs the row's stand-in, and a graph with an effect but no stand-in
// is not probed (its bucket is refused naming the op). Before a graph with effects first
// replays, the agreement check runs once with a hash of what was traced.
#include <string>
#include <vector>

#include "graph/effects.h"
#include "helpers.h"
#include "nn/layers.h"
#include "nn/lstm.h"
#include "ops/dispatch.h"

namespace encore {
namespace {

int g_runs = 0;

int infer_same(const OpDef&, std::span<const Tensor> in, const Attrs&, TensorMeta* out) {
  out[0] = TensorMeta{in[0].shape(), {}, 0, in[0].dtype(), in[0].device()};
  return 1;
}

// An identity that counts: a stand-in for a collective (an all-reduce in a group of one).
void counting_copy(const KernelCtx& c) {
  ++g_runs;
  copy_op_def().kernels[static_cast<int>(DeviceType::CPU)].run(c);
}

// Rows of the test only: not in the registry (the op table would run them).
OpDef effect_row(const char* name, const OpDef& (*stand_in)()) {
  OpDef d{.name = name,
          .external_effect = true,
          .stand_in = stand_in,
          .infer = infer_same,
          .cpu = {counting_copy}};
  d.kernels[static_cast<int>(DeviceType::CPU)] = d.cpu;
  return d;
}
const OpDef& effect_op() {
  static const OpDef d = effect_row("test_effect", copy_op_def);
  return d;
}
const OpDef& local_only_op() {
  static const OpDef d = effect_row("test_effect_without_stand_in", nullptr);
  return d;
}
Tensor effect(const Tensor& x) { return call(effect_op(), {x}); }
Tensor local_only(const Tensor& x) { return call(local_only_op(), {x}); }

// Installs an agreement check that records what it was given, for the test's scope.
struct Agreements {
  struct Seen {
    uint64_t hash;
    std::string description;
  };
  static inline std::vector<Seen> seen;
  static inline bool refuse = false;
  static void check(uint64_t hash, std::string_view description) {
    seen.push_back({hash, std::string(description)});
    if (refuse) throw ValueError("[test] the ranks traced different graphs");
  }
  Agreements() : previous(graph::set_agreement_check(&check)) {
    seen.clear();
    refuse = false;
  }
  ~Agreements() { graph::set_agreement_check(previous); }
  graph::AgreementCheck previous;
};

TEST(Effects, RunOncePerCallEagerAndTraced) {
  g_runs = 0;
  auto body = [](const Tensor& x) { return effect(x) * 2.0; };
  (void)body(ones({3}));
  EXPECT_EQ(g_runs, 1);
  auto f = trace(body);
  const Tensor first = f(ones({3}));  // runs eagerly, then traces (nothing runs while tracing)
  EXPECT_EQ(g_runs, 2);
  test::expect_values(first, {2, 2, 2});
  for (int call = 1; call <= 3; ++call) {
    test::expect_values(f(full({3}, 2.0)), {4, 4, 4});
    EXPECT_EQ(g_runs, 2 + call);
  }
  EXPECT_EQ(f.stats().traces, 1);
}

// Dead code elimination removes nodes whose results nobody sees; an effect is seen anyway.
TEST(Effects, PassesNeverRemoveThem) {
  g_runs = 0;
  auto f = trace([](const Tensor& x) {
    (void)effect(x);
    return x * 2.0;
  });
  for (int call = 1; call <= 3; ++call) {
    (void)f(ones({2}));
    EXPECT_EQ(g_runs, call);
  }
  EXPECT_EQ(f.function().last_plan()->graph().count("test_effect"), 1);
}

// A bucket's first trace probes its graph several times: with the stand-in, never the op.
TEST(Effects, BucketProbesRunTheStandIn) {
  g_runs = 0;
  manual_seed(5);
  nn::LSTM lstm(3, {.return_sequences = true});
  lstm.build({2, 9, 2});
  auto body = [&](const Tensor& x) { return effect(lstm(x)); };
  auto f = trace(body, {.shapes = ShapePolicy::bucket(1, {16})});
  int expected = 0;
  for (int64_t len : {9, 12, 7, 16}) {
    const Tensor x = test::rand32({2, len, 2}, static_cast<uint64_t>(len));
    const Tensor bucketed = f(x);
    EXPECT_EQ(g_runs, ++expected) << "length " << len;
    const Tensor eager = body(x);
    ++expected;
    EXPECT_LT(test::max_abs_diff(bucketed, eager), 1e-5) << "length " << len;
  }
  EXPECT_EQ(f.stats().traces, 1);
}

// No stand-in: the bucket cannot be probed and is refused, naming the op; the call ran once.
TEST(Effects, WithoutAStandInTheBucketIsRefused) {
  g_runs = 0;
  auto f = trace([](const Tensor& x) { return local_only(x) * 2.0; },
                 {.name = "step", .shapes = ShapePolicy::bucket(1, {16})});
  test::expect_throw_message<ValueError>(
      [&] {
        f(test::rand32({2, 9, 2}));
      },
      "of 'step' cannot be probed for exactness: [test_effect_without_stand_in] acts outside the "
      "process");
  EXPECT_EQ(g_runs, 1);
  EXPECT_EQ(f.function().cache_size(), 0u);
}

// The retrace warning traces the latest call once more as a bucket would and probes it: the
// op runs once per call all the same, and without a stand-in the advice says why none is given.
TEST(Effects, RetraceWarningProbesNeverRunThem) {
  for (const bool stand_in : {true, false}) {
    g_runs = 0;
    std::string warning;
    auto f =
        trace([&](const Tensor& x) { return (stand_in ? effect(x) : local_only(x)) * 2.0; },
              {.retrace_warning = 2, .on_warning = [&](const std::string& w) { warning = w; }});
    for (int64_t len : {4, 5, 6, 7}) (void)f(test::rand32({2, len, 3}));
    EXPECT_EQ(g_runs, 4) << stand_in;
    EXPECT_NE(warning.find(stand_in ? "Padding along axis 1 is exact" : "acts outside the process"),
              std::string::npos)
        << warning;
  }
}

TEST(Effects, AgreementIsCheckedOnceBeforeTheFirstReplay) {
  const Agreements agreements;
  g_runs = 0;
  auto f =
      trace([](const Tensor& x) { return effect(x) + 1.0; }, {.name = "step", .arg_names = {"x"}});
  (void)f(ones({4}));
  EXPECT_TRUE(Agreements::seen.empty());  // the first call ran eagerly
  (void)f(ones({4}));
  (void)f(ones({4}));
  ASSERT_EQ(Agreements::seen.size(), 1u);
  const std::string& d = Agreements::seen[0].description;
  EXPECT_NE(d.find("traced function 'step' (x: (4,) float32"), std::string::npos) << d;
  EXPECT_NE(d.find("external effects: test_effect() (4,) float32 -> (4,) float32"),
            std::string::npos)
      << d;
  EXPECT_EQ(Agreements::seen[0].hash, graph::fnv1a(d));
  // Another shape is another graph: checked before its own first replay, with another hash.
  (void)f(ones({5}));
  (void)f(ones({5}));
  ASSERT_EQ(Agreements::seen.size(), 2u);
  EXPECT_NE(Agreements::seen[1].hash, Agreements::seen[0].hash);
  EXPECT_EQ(g_runs, 5);
  // A function without effects is never checked.
  auto plain = trace([](const Tensor& x) { return x + 1.0; });
  for (int i = 0; i < 3; ++i) (void)plain(ones({4}));
  EXPECT_EQ(Agreements::seen.size(), 2u);
}

// A check that fails stops the replay (the op does not run); the next call checks again.
TEST(Effects, AFailedAgreementStopsTheReplay) {
  const Agreements agreements;
  g_runs = 0;
  auto f = trace([](const Tensor& x) { return effect(x); });
  (void)f(ones({2}));
  Agreements::refuse = true;
  test::expect_throw_message<ValueError>([&] { f(ones({2})); },
                                         "the ranks traced different graphs");
  EXPECT_EQ(g_runs, 1);
  Agreements::refuse = false;
  (void)f(ones({2}));
  EXPECT_EQ(g_runs, 2);
  EXPECT_EQ(Agreements::seen.size(), 2u);
}

// The lengths of a bucket are data: ranks whose calls have different lengths of one bucket
// traced the same graph, and agree.
TEST(Effects, TheLengthsOfABucketAreNotPartOfTheHash) {
  const Agreements agreements;
  manual_seed(6);
  nn::Dense dense(2);
  dense.build({2, 9, 3});
  std::vector<uint64_t> hashes;
  for (int64_t len : {9, 13}) {
    auto f = trace([&](const Tensor& x) { return effect(dense(x)); },
                   {.shapes = ShapePolicy::bucket(1, {16})});
    (void)f(test::rand32({2, len, 3}));
    (void)f(test::rand32({2, len, 3}));
    ASSERT_FALSE(Agreements::seen.empty());
    hashes.push_back(Agreements::seen.back().hash);
  }
  EXPECT_EQ(hashes[0], hashes[1]);
}

}  // namespace
}  // namespace encore
