// Tape semantics: accumulation, no-grad scopes, views, reuse, freed graphs, stale saves.
#include <pthread.h>

#include "core/modes.h"
#include "helpers.h"

namespace encore {
namespace {

using test::expect_values;

TEST(Autograd, ChainRuleThroughSharedInputs) {
  Tensor x = from_vector<double>({1, 2, 3}, {3}).set_requires_grad();
  sum(x * x * x).backward();
  expect_values(x.grad(), {3, 12, 27});
}

// Which inputs need a gradient is known for any number of inputs (a mask of 32 bits shifted
// past its width for the later steps of a long sequence).
TEST(Autograd, OpsWithManyInputsGiveEachItsGradient) {
  std::vector<Tensor> xs;
  for (int i = 0; i < 70; ++i) {
    Tensor x = from_vector<double>({1.0 * i}, {1});
    if (i % 3 != 1) x.set_requires_grad();
    xs.push_back(x);
  }
  sum(stack(xs, 0) * stack(xs, 0)).backward();
  for (int i = 0; i < 70; ++i) {
    if (i % 3 == 1)
      EXPECT_FALSE(xs[i].grad().defined()) << i;
    else
      expect_values(xs[i].grad(), {2.0 * i});
  }
}

// A loss summed over many steps without .item() keeps a chain of nodes, each alive through the
// next one's edge or saved input: freeing it recursed once per node and overflowed the stack
// (from Python, a crash between 100k and 200k ops). It is freed in a loop: here 60k-node chains
// are made and freed on a thread with a 1 MiB stack, which the recursion overflowed.
TEST(Autograd, FreeingAVeryLongChainDoesNotRecurse) {
  bool done = false;
  auto body = [&] {
    Tensor w = ones({4});
    w.set_requires_grad();
    Tensor total = zeros({});
    for (int i = 0; i < 60000; ++i) total = total + sum(w * 1.0);  // through edges
    Tensor sigmoids = w;
    for (int i = 0; i < 30000; ++i) sigmoids = sigmoid(sigmoids) * 1.0;  // saved inputs and logits
    total.backward();
    EXPECT_EQ(w.grad().to_vector<float>()[0], 60000.0f);
    total = Tensor();
    sigmoids = Tensor();
    done = true;
  };
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, size_t{1} << 20);
  pthread_t thread;
  ASSERT_EQ(pthread_create(
                &thread, &attr,
                [](void* f) -> void* {
                  (*static_cast<decltype(body)*>(f))();
                  return nullptr;
                },
                &body),
            0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
  EXPECT_TRUE(done);
}

TEST(Autograd, GradientsAccumulateAcrossBackwardCalls) {
  Tensor x = from_vector<double>({1, 2}, {2}).set_requires_grad();
  sum(x * 3.0).backward();
  sum(x * x).backward();
  expect_values(x.grad(), {5, 7});
}

TEST(Autograd, LeafGradientsNeverAlias) {
  Tensor a = ones({3}).set_requires_grad(), b = ones({3}).set_requires_grad();
  sum(a + b).backward();
  EXPECT_NE(a.grad().storage(), b.grad().storage());
  {
    NoGradGuard no_grad;
    a.grad().fill_(5);
  }
  expect_values(b.grad(), {1, 1, 1});
  // A broadcast gradient (stride 0) is materialized before it becomes .grad.
  Tensor c = ones({1}).set_requires_grad();
  sum(c.expand({4})).backward();
  expect_values(c.grad(), {4});
}

TEST(Autograd, NoGradGuardStopsRecording) {
  Tensor x = ones({2}).set_requires_grad();
  {
    NoGradGuard no_grad;
    EXPECT_FALSE((x * 2.0).requires_grad());
    EnableGradGuard enable;
    EXPECT_TRUE((x * 2.0).requires_grad());
  }
  EXPECT_TRUE((x * 2.0).requires_grad());
  EXPECT_FALSE((x.detach() * 2.0).requires_grad());
}

TEST(Autograd, GradientsFlowThroughViews) {
  Tensor x = arange(0, 6, 1, DType::Float64).reshape({2, 3}).detach().set_requires_grad();
  const Tensor y = x.transpose(0, 1).slice(0, 1, 3);  // rows 1..2 of x^T
  sum(y * y).backward();
  expect_values(x.grad(), {0, 2, 4, 0, 8, 10});
}

TEST(Autograd, SecondBackwardThroughAFreedGraphFails) {
  Tensor x = ones({2}).set_requires_grad();
  const Tensor y = sum(exp(x));
  y.backward();
  EXPECT_THROW(y.backward(), ValueError);
}

TEST(Autograd, InPlaceChangeOfASavedTensorIsDetected) {
  Tensor x = ones({2}).set_requires_grad();
  Tensor h = exp(x);  // h is saved by the next mul
  Tensor y = sum(h * h);
  {
    NoGradGuard no_grad;
    h.fill_(0);
  }
  EXPECT_THROW(y.backward(), ValueError);
}

TEST(Autograd, UnusedOutputOfAMultiOutputOp) {
  Tensor z = test::rand64({2, 8}).set_requires_grad();
  Tensor c = test::rand64({2, 2}, 2).set_requires_grad();
  auto [h, c1] = lstm_cell(z, c, Activation::Tanh, Activation::Sigmoid);
  sum(h).backward();  // c1 unused: its gradient is zero
  EXPECT_TRUE(z.grad().defined());
  EXPECT_TRUE(c.grad().defined());
}

TEST(Autograd, IntegerInputsGetNoGradient) {
  Tensor x = test::rand64({2, 3}).set_requires_grad();
  sum(gather_last(x, from_vector<int64_t>({0, 2}, {2}))).backward();
  expect_values(x.grad(), {1, 0, 0, 0, 0, 1});
}

}  // namespace
}  // namespace encore
