// The CPU convolutions' 'blocked' activation layout: conv1d emits to_blocked -> a convolution on
// blocked operands -> from_blocked, visible ops whose gradients are the inverse conversions;
// results match the native layout's, and a traced step keeps consecutive convolutions blocked
// (graph/passes.h: remove_layout_round_trips), bitwise equal to the eager step.
#include "core/ledger.h"
#include "graph/trace.h"
#include "helpers.h"
#include "nn/optim.h"
#include "ops/conv.h"

namespace encore {
namespace {

struct LayoutGuard {
  ~LayoutGuard() { set_conv1d_layout(Conv1dLayout::Native); }
};

// Three convolutions (20 filters: a partly filled last block), their loss and gradients.
struct Stack {
  std::vector<Tensor> params{test::rand32({5, 32, 20}, 1), test::rand32({20}, 2),
                             test::rand32({3, 20, 20}, 3), test::rand32({20}, 4),
                             test::rand32({3, 20, 20}, 5)};
  Stack() {
    for (Tensor& p : params) p.set_requires_grad();
  }
  Tensor forward(const Tensor& x) const {
    Tensor h = conv1d_fused(x, params[0], params[1], 1, Padding::same(), 1, Activation::Relu);
    h = conv1d_fused(h, params[2], params[3], 1, Padding::same(), 1, Activation::Tanh);
    return conv1d(h, params[4], 2, Padding::same());
  }
  static Tensor sq(const Tensor& y) { return y * y; }
  // The loss and every gradient, for comparison.
  std::vector<Tensor> step(const Tensor& x) {
    for (Tensor& p : params) p.set_grad(Tensor());
    const Tensor loss = mean(sq(forward(x)));
    loss.backward();
    std::vector<Tensor> out{loss};
    for (const Tensor& p : params) out.push_back(p.grad());
    return out;
  }
};

const Tensor& input() {
  static const Tensor x = test::rand32({4, 48, 32}, 7);
  return x;
}

int64_t conversions() { return Ledger::global().get(Counter::LayoutReorders); }

TEST(Conv1dLayout, BlockedMatchesNative) {
  LayoutGuard guard;
  Stack stack;
  const std::vector<Tensor> native = stack.step(input());
  int64_t before = conversions();
  stack.step(input());
  EXPECT_EQ(conversions(), before);  // nwc is never converted
  set_conv1d_layout(Conv1dLayout::Blocked);
  before = conversions();
  const std::vector<Tensor> blocked = stack.step(input());
  EXPECT_GT(conversions(), before);
  bool named = false;
  for (const ConvPrimitiveInfo& p : conv1d_primitives())
    named |= p.key.find(" blocked=(") != std::string::npos;
  EXPECT_TRUE(named);
  for (size_t i = 0; i < native.size(); ++i) {
    ASSERT_EQ(native[i].shape(), blocked[i].shape()) << "result " << i;
    const double scale = max(abs(native[i])).item();
    EXPECT_LE(test::max_abs_diff(native[i], blocked[i]), 1e-5 * scale) << "result " << i;
  }
}

TEST(Conv1dLayout, TracedStackStaysBlockedAndMatchesEagerBitwise) {
  LayoutGuard guard;
  set_conv1d_layout(Conv1dLayout::Blocked);
  Stack eager_stack, traced_stack;
  nn::SGD eager_sgd(eager_stack.params, 0.1), traced_sgd(traced_stack.params, 0.1);
  auto traced = trace([&](const Tensor& x) {
    std::vector<Tensor> r = traced_stack.step(x);
    traced_sgd.step();
    return r[0];
  });
  for (int i = 0; i < 3; ++i) {
    const int64_t before = conversions();
    const std::vector<Tensor> e = eager_stack.step(input());
    const int64_t eager_conversions = conversions() - before;
    eager_sgd.step();
    const Tensor loss = traced(input());
    EXPECT_TRUE(test::bitwise_equal(e[0], loss)) << "step " << i;
    if (i > 0) {
      const graph::Graph& g = traced.function().last_plan()->graph();
      const int traced_conversions = g.count("to_blocked") + g.count("from_blocked");
      // Eager: around every convolution. Traced: no from_blocked -> to_blocked round trip is
      // left, so at least the forward's two inner pairs are gone (where oneDNN prefers the
      // forward's layouts for the gradients too, as on AVX-512 here, their pairs go as well:
      // 11 conversions eager, 3 nodes traced).
      EXPECT_GE(eager_conversions, 8) << g.str();
      EXPECT_LE(traced_conversions, eager_conversions - 4) << g.str();
      for (const graph::Node& n : g.nodes)
        if (std::string_view(n.op->name) == "to_blocked")
          for (const graph::Node& m : g.nodes)
            if (std::string_view(m.op->name) == "from_blocked" &&
                m.out[0].buffer == n.in[0].buffer) {
              EXPECT_NE(m.in[0].shape, n.out[0].shape) << "a round trip is left\n" << g.str();
            }
    }
  }
  for (size_t p = 0; p < eager_stack.params.size(); ++p)
    EXPECT_TRUE(test::bitwise_equal(eager_stack.params[p], traced_stack.params[p]))
        << "parameter " << p;
}

TEST(Conv1dLayout, ConversionsRoundTripAndReadStridedViews) {
  const Tensor x = test::rand32({3, 7, 20}, 9);
  const Tensor xb = to_blocked(x, 8);
  EXPECT_EQ(xb.shape(), Shape({3, 3, 7, 8}));
  EXPECT_TRUE(test::bitwise_equal(from_blocked(xb, 20), x));
  EXPECT_EQ(max(abs(xb.slice(1, 2, 3).slice(3, 4, 8))).item(),
            0.0);  // channels 20..23: the zero tail
  // A transposed view and a broadcast one read in place, as their contiguous copies.
  const Tensor t = test::rand32({3, 20, 7}, 10).transpose(1, 2);
  EXPECT_TRUE(test::bitwise_equal(to_blocked(t, 16), to_blocked(t.contiguous(), 16)));
  const Tensor b = test::rand32({3, 1, 20}, 11).expand({3, 7, 20});
  EXPECT_TRUE(test::bitwise_equal(to_blocked(b, 4), to_blocked(b.contiguous(), 4)));
}

TEST(Conv1dLayout, UnknownLayoutIsAValueError) {
  EXPECT_EQ(parse_conv1d_layout("blocked"), Conv1dLayout::Blocked);
  try {
    parse_conv1d_layout("nCw16c");
    ADD_FAILURE() << "accepted";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("[conv1d] unknown layout 'nCw16c'"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace encore
