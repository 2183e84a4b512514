// unbind and split, and the gradient of many slices of one tensor: each slice adds its part in
// place into one buffer (OpDef::accumulate), so the backward of T pieces costs O(size), not
// O(size * T), eagerly and traced.
#include "core/ledger.h"
#include "graph/trace.h"
#include "helpers.h"

namespace encore {
namespace {

using test::bitwise_equal;
using test::expect_values;
using test::rand64;

// sum_i (i + 1) * sum(piece_i): the gradient of step i is i + 1 everywhere.
Tensor weighted_steps(const Tensor& x) {
  Tensor loss;
  const std::vector<Tensor> steps = unbind(x, 1);
  for (size_t i = 0; i < steps.size(); ++i) {
    const Tensor term = sum(steps[i]) * static_cast<double>(i + 1);
    loss = loss.defined() ? loss + term : term;
  }
  return loss;
}

TEST(Split, UnbindAndSplitAreViews) {
  const Tensor x = rand64({2, 6, 3});
  const std::vector<Tensor> u = unbind(x, 1);
  ASSERT_EQ(u.size(), 6u);
  EXPECT_EQ(u[4].shape(), (Shape{2, 3}));
  EXPECT_TRUE(u[4].storage() == x.storage());
  EXPECT_TRUE(bitwise_equal(u[4], x.slice(1, 4, 5).squeeze(1)));
  const std::vector<Tensor> s = split(x, 3, 1);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_TRUE(bitwise_equal(s[2], x.slice(1, 4, 6)));
  EXPECT_THROW(split(x, 4, 1), ValueError);
  EXPECT_THROW(split(x, 0, 1), ValueError);
  EXPECT_TRUE(unbind(zeros({2, 0}), 1).empty());
}

TEST(Split, GradientOfManyPiecesIsOneBuffer) {
  const int64_t steps = 40;
  const Tensor x = rand64({4, steps, 8}).set_requires_grad();
  const Tensor loss = weighted_steps(x * 1.0);  // a non-leaf: the engine's own buffer
  Ledger& l = Ledger::global();
  const int64_t before = l.get(Counter::BytesAllocated);
  loss.backward();
  const int64_t bytes = l.get(Counter::BytesAllocated) - before;
  // One full-size buffer for the pieces (and one for x's gradient), not one per piece.
  EXPECT_LT(bytes, 4 * x.nbytes()) << bytes << " bytes allocated by the backward pass";
  for (int64_t t : {int64_t{0}, int64_t{17}, steps - 1})
    expect_values(x.grad().slice(1, t, t + 1), std::vector<double>(32, static_cast<double>(t + 1)));
}

TEST(Split, TracedGradientHasNoFullSizePieces) {
  Tensor w = ones({1, 1, 8}, DType::Float64).set_requires_grad();
  auto f = [&](const Tensor& x) {
    w.set_grad(Tensor());
    weighted_steps(x * w).backward();
    return w.grad();
  };
  const Tensor x = rand64({2, 12, 8});
  auto traced = trace(f);
  const Tensor eager = f(x).clone();
  traced(x);
  const Tensor replayed = traced(x).clone();
  EXPECT_TRUE(bitwise_equal(eager, replayed));
  const graph::Graph& g = traced.function().last_plan()->graph();
  EXPECT_EQ(g.count("slice_grad"), 0) << g.str();
  EXPECT_GE(g.count("add_"), 12) << g.str();  // one in-place part per step
}

}  // namespace
}  // namespace encore
