// The effects rule as the ranks see it (graph/effects.h, its check dist::check_agreement): ranks
// that traced different steps get an error naming every side before the first replay, and nothing
// encore runs on its own (bucket probes, retrace-warning probes) runs a collective.
#include <gtest/gtest.h>

#include "../cpp/helpers.h"
#include "core/dist.h"
#include "core/ledger.h"
#include "graph/effects.h"
#include "graph/trace.h"
#include "ops/collective.h"
#include "ops/ops.h"

namespace encore {
namespace {

TEST(Agreement, RanksThatTracedDifferentLengthsFailBeforeReplaying) {
  if (dist::size() == 1) GTEST_SKIP() << "one rank always agrees";
  auto step =
      trace([](const Tensor& x) { return dist::all_reduce(sum(x)); }, {.name = "mismatched"});
  const Tensor x = ones({4 + dist::rank()});  // compatible collectives, different graphs
  step(x);                                    // eager: a scalar all-reduce on every rank
  try {
    step(x);
    ADD_FAILURE() << "rank " << dist::rank() << " replayed a graph the others did not trace";
  } catch (const DistributedError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("rank 0: "), std::string::npos) << what;
    EXPECT_NE(what.find("rank 1: "), std::string::npos) << what;
  }
}

TEST(Agreement, AgreeingRanksReplayAfterOneCheck) {
  auto step = trace([](const Tensor& x) { return dist::all_reduce(x * 2.0); });
  const Tensor x = ones({3});
  const int64_t before = Ledger::global().get(Counter::Collectives);
  for (int i = 0; i < 4; ++i)
    test::expect_values(step(x), std::vector<double>(3, 2.0 * dist::size()), 0);
  // One all-reduce per call; the check itself is not an op.
  EXPECT_EQ(Ledger::global().get(Counter::Collectives) - before, 4);
}

TEST(Agreement, BucketProbesRunNoCollective) {
  // Exact under the bucket (elementwise: its padded positions are trimmed off), so the probe
  // runs in full, with the all-reduce's stand-in.
  auto step = trace([](const Tensor& x) { return dist::all_reduce(x * 2.0); },
                    {.shapes = ShapePolicy::bucket(1, {8, 16}, {0})});
  const int64_t before = Ledger::global().get(Counter::Collectives);
  for (int64_t n : {5, 6, 7, 12}) {
    const Tensor y = step(ones({2, n}));
    EXPECT_EQ(y.shape(), Shape({2, n}));
    EXPECT_EQ(max(abs(y - 2.0 * dist::size())).item(), 0.0) << "length " << n;
  }
  EXPECT_EQ(step.stats().traces, 2);
  EXPECT_EQ(Ledger::global().get(Counter::Collectives) - before, 4) << "a probe ran a collective";
}

TEST(Agreement, RetraceWarningProbesRunNoCollective) {
  std::vector<std::string> warnings;
  auto step = trace(
      [](const Tensor& x) { return dist::all_reduce(sum(x, {1})); },
      {.retrace_warning = 2, .on_warning = [&](const std::string& w) { warnings.push_back(w); }});
  const int64_t before = Ledger::global().get(Counter::Collectives);
  for (int64_t n : {3, 4, 5, 6}) step(ones({2, n}));
  EXPECT_EQ(warnings.size(), 1u);
  EXPECT_EQ(Ledger::global().get(Counter::Collectives) - before, 4) << "a probe ran a collective";
}

}  // namespace
}  // namespace encore
