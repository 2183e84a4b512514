// Collectives (ops/collective.h) in the world this binary runs in: alone (a group of one, every
// collective the identity) or under mpirun -np 2 / -np 3 (tests/dist/run_mpi.py). Expected
// values are computed here from the rank arithmetic, never by encore.
#include <gtest/gtest.h>

#include "../cpp/helpers.h"
#include "core/dist.h"
#include "core/ledger.h"
#include "graph/trace.h"
#include "ops/collective.h"
#include "ops/ops.h"

namespace encore {
namespace {

int R() { return dist::rank(); }
int N() { return dist::size(); }

TEST(Collectives, WorldMatchesTheLauncher) {
  const dist::Group g = dist::init();
  EXPECT_EQ(g.rank, R());
  EXPECT_EQ(g.size, N());
  if (dist::launched()) {
    EXPECT_EQ(g.backend, "mpi");
    EXPECT_TRUE(dist::unavailable_reason().empty()) << dist::unavailable_reason();
  } else {
    EXPECT_EQ(g.size, 1);
    EXPECT_EQ(g.backend, "none");
  }
}

TEST(Collectives, AllReduceSumMeanMaxEveryDType) {
  // Rank r holds r + 1 + i at position i: sum N(N+1)/2 + N i, max N + i.
  const double n = N(), tri = n * (n + 1) / 2;
  for (DType t : {DType::Float32, DType::Float64, DType::Int32, DType::Int64}) {
    const Tensor x = (arange(0, 6, 1, DType::Float64) + (R() + 1.0)).reshape({2, 3}).to(t);
    std::vector<double> sum, mean, max;
    for (int i = 0; i < 6; ++i) {
      sum.push_back(tri + n * i);
      mean.push_back((tri + n * i) / n);
      max.push_back(n + i);
    }
    test::expect_values(dist::all_reduce(x, "sum"), sum, 0);
    test::expect_values(dist::all_reduce(x, dist::ReduceOp::Max), max, 0);
    if (is_floating(t)) test::expect_values(dist::all_reduce(x, "mean"), mean, 1e-6);
    EXPECT_EQ(dist::all_reduce(x).dtype(), t);
    EXPECT_EQ(dist::all_reduce(x).shape(), x.shape());
  }
}

TEST(Collectives, BroadcastFromTheLastRankAndAllGatherInRankOrder) {
  const Tensor x = full({2, 2}, R() * 10.0, DType::Float64);
  test::expect_values(dist::broadcast(x, N() - 1), std::vector<double>(4, (N() - 1) * 10.0), 0);
  const Tensor g = dist::all_gather(x);
  EXPECT_EQ(g.shape(), (Shape{2 * N(), 2}));
  std::vector<double> expected;
  for (int r = 0; r < N(); ++r)
    for (int i = 0; i < 4; ++i) expected.push_back(r * 10.0);
  test::expect_values(g, expected, 0);
  const Tensor scalar = full({}, R() + 1.0, DType::Float32);
  EXPECT_EQ(dist::all_gather(scalar).shape(), (Shape{N()}));
}

TEST(Collectives, StridedEmptyAndLargeInputs) {
  const Tensor m = (arange(0, 12, 1, DType::Float32) + static_cast<double>(R())).reshape({3, 4});
  const Tensor t = m.transpose(0, 1);  // strided: the dispatcher hands the kernel a dense copy
  EXPECT_EQ(test::max_abs_diff(dist::all_reduce(t, "max"), t + static_cast<double>(N() - 1 - R())),
            0.0);
  EXPECT_EQ(dist::all_reduce(zeros({0, 3})).shape(), (Shape{0, 3}));
  EXPECT_EQ(dist::all_gather(zeros({0, 3})).shape(), (Shape{0, 3}));
  const Tensor big = ones({1 << 20}, DType::Float32);
  EXPECT_EQ(sum(dist::all_reduce(big)).item(), static_cast<double>(N()) * (1 << 20));
}

TEST(Collectives, ErrorsNameTheOp) {
  test::expect_throw_message<DTypeError>([] { dist::all_reduce(ones({2}, DType::Int32), "mean"); },
                                         "[all_reduce]");
  test::expect_throw_message<ValueError>([] { dist::all_reduce(ones({2}), "prod"); },
                                         "'sum', 'mean' or 'max'");
  test::expect_throw_message<ValueError>([] { dist::broadcast(ones({2}), N()); }, "is not a rank");
  test::expect_throw_message<ValueError>([] { dist::broadcast(ones({2}), -1); }, "is not a rank");
}

TEST(Collectives, AllReduceIsDifferentiable) {
  // loss_r = sum((r + 1) * all_reduce(w * x, op)): d loss / d w = x * all_reduce((r + 1), op).
  const double n = N(), tri = n * (n + 1) / 2;
  for (const char* op : {"sum", "mean"}) {
    Tensor w = full({3}, 0.5, DType::Float64);
    w.set_requires_grad(true);
    const Tensor x = arange(1, 4, 1, DType::Float64);
    sum(dist::all_reduce(w * x, op) * (R() + 1.0)).backward();
    const double factor = std::string(op) == "sum" ? tri : tri / n;
    test::expect_values(w.grad(), {factor, 2 * factor, 3 * factor}, 1e-12);
  }
  // max: the rank holding the maximum gets the summed gradient, the others nothing.
  Tensor v = full({2}, static_cast<double>(R()), DType::Float64);
  v.set_requires_grad(true);
  sum(dist::all_reduce(v, "max")).backward();
  const double mine = R() == N() - 1 ? n : 0.0;
  test::expect_values(v.grad(), {mine, mine}, 0);
  // all_gather: each rank gets its rows of the summed gradient.
  Tensor u = full({2}, 1.0, DType::Float64);
  u.set_requires_grad(true);
  const Tensor weights = arange(0, 2 * n, 1, DType::Float64);
  sum(dist::all_gather(u) * weights).backward();
  test::expect_values(u.grad(), {n * (2 * R()), n * (2 * R() + 1)}, 0);
}

TEST(Collectives, TracedStepReplaysItsCollectivesBitwise) {
  Tensor w = full({4}, 0.25, DType::Float32);
  auto step = trace([&](const Tensor& x) {
    const Tensor y = dist::all_reduce(x * w, "mean");
    const Tensor started = y + 1.0;
    dist::all_reduce_start_(started, dist::ReduceOp::Sum);
    const Tensor other = exp(y);  // runs while the all-reduce is in flight
    dist::all_reduce_wait_(started);
    return started + other;
  });
  std::vector<Tensor> eager_results;
  for (int i = 0; i < 3; ++i) {
    const Tensor x = full({4}, R() + 1.0 + i, DType::Float32);
    const Tensor y = dist::all_reduce(x * w, "mean");
    const Tensor z = y + 1.0;
    dist::all_reduce_start_(z, dist::ReduceOp::Sum);
    dist::all_reduce_wait_(z);
    eager_results.push_back(z + exp(y));
  }
  const int64_t calls_before = Ledger::global().get(Counter::Collectives);
  for (int i = 0; i < 3; ++i) {
    const Tensor x = full({4}, R() + 1.0 + i, DType::Float32);
    EXPECT_TRUE(test::bitwise_equal(step(x), eager_results[i])) << "call " << i;
  }
  EXPECT_EQ(step.stats().traces, 1);
  EXPECT_EQ(step.stats().hits, 2);
  // Two collectives per call, each exactly once: eager (first call) and two replays; the trace
  // ran none.
  EXPECT_EQ(Ledger::global().get(Counter::Collectives) - calls_before, 6);
  const graph::Plan* plan = step.function().last_plan();
  ASSERT_NE(plan, nullptr);
  EXPECT_EQ(plan->graph().count("all_reduce"), 1);
  EXPECT_EQ(plan->graph().count("all_reduce_start_"), 1);
  EXPECT_EQ(plan->graph().count("all_reduce_wait_"), 1);
}

TEST(Collectives, UnusedResultsStillRunOnEveryRank) {
  // Dead code elimination keeps a collective whose result nothing reads: eager ran it, so every
  // replay must too, or the ranks' sequences part.
  auto step = trace([](const Tensor& x) {
    (void)dist::all_reduce(x);
    return x * 2.0;
  });
  const Tensor x = ones({3});
  for (int i = 0; i < 3; ++i) step(x);
  EXPECT_EQ(step.function().last_plan()->graph().count("all_reduce"), 1);
}

TEST(Collectives, AgreementCheckNamesEverySide) {
  dist::check_agreement(42, "same everywhere");  // no error
  if (N() == 1) GTEST_SKIP() << "a group of one always agrees";
  try {
    dist::check_agreement(R() == 0 ? 1 : 2, R() == 0 ? "graph A" : "graph B");
    ADD_FAILURE() << "no error on rank " << R();
  } catch (const DistributedError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("rank 0: graph A"), std::string::npos) << what;
    EXPECT_NE(what.find("rank 1: graph B"), std::string::npos) << what;
  }
  dist::barrier();  // the engine still serves after a disagreement
}

}  // namespace
}  // namespace encore
