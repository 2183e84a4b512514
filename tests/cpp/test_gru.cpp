// The GRU layer (composed path): gradients of every option, its equations in both reset forms,
// go_backwards and return_state, Bidirectional, eager/traced equality and its errors. Keras'
// own numbers are checked against a NumPy reference in tests/python/test_gru.py.
#include "graph/trace.h"
#include "helpers.h"
#include "nn/gru.h"
#include "nn/layers.h"
#include "nn/losses.h"
#include "nn/optim.h"

namespace encore {
namespace {

using test::check_parameter_gradients;
using test::expect_eager_and_traced_training_bitwise;
using test::max_abs_diff;
using test::rand32;
using test::rand64;

TEST(Gru, GradientsOfEveryOption) {
  manual_seed(11);
  nn::GRU a(3, {.return_sequences = true});
  check_parameter_gradients(a, rand64({2, 4, 2}));
  nn::GRU b(2, {.activation = "relu",
                .recurrent_activation = "hard_sigmoid",
                .go_backwards = true,
                .reset_after = false});
  check_parameter_gradients(b, rand64({2, 3, 2}, 5));
  nn::GRU c(2, {.return_sequences = true, .reset_after = false});
  check_parameter_gradients(c, rand64({1, 4, 3}, 6));
  nn::Bidirectional bi(std::make_shared<nn::GRU>(2, nn::GRUOptions{.return_sequences = true}));
  check_parameter_gradients(bi, rand64({1, 3, 2}, 7));
}

// The equations of the header, step by step with ordinary ops.
Tensor reference_gru(const Tensor& x, const Tensor& W, const Tensor& R, const Tensor& b,
                     bool reset_after, std::vector<Tensor>* states) {
  NoGradGuard no_grad;
  const int64_t u = R.shape()[0];
  Tensor h = zeros({x.shape()[0], u}, x.dtype());
  auto part = [](const Tensor& t, int64_t i, int64_t u) { return t.slice(-1, i * u, (i + 1) * u); };
  for (int64_t t = 0; t < x.shape()[1]; ++t) {
    const Tensor xt = x.slice(1, t, t + 1).squeeze(1);
    const Tensor b_in = reset_after ? b.slice(0, 0, 1).squeeze(0) : b;
    const Tensor xw = matmul(xt, W) + b_in;
    const Tensor hr = reset_after ? matmul(h, R) + b.slice(0, 1, 2).squeeze(0) : matmul(h, R);
    const Tensor z = sigmoid(part(xw, 0, u) + part(hr, 0, u));
    const Tensor r = sigmoid(part(xw, 1, u) + part(hr, 1, u));
    const Tensor hh = reset_after ? tanh(part(xw, 2, u) + r * part(hr, 2, u))
                                  : tanh(part(xw, 2, u) + matmul(r * h, part(R, 2, u)));
    h = z * h + (1.0 - z) * hh;
    states->push_back(h);
  }
  return h;
}

TEST(Gru, MatchesItsEquationsInBothResetForms) {
  for (bool reset_after : {true, false}) {
    SCOPED_TRACE(reset_after ? "reset_after" : "reset_before");
    manual_seed(12);
    nn::GRU gru(3, {.return_sequences = true, .return_state = true, .reset_after = reset_after});
    const Tensor x = rand64({2, 5, 4});
    gru.build(x.shape());
    gru.to(DType::Float64);
    NoGradGuard no_grad;
    for (Tensor& p : gru.parameters()) p.copy_(rand64(p.shape(), 40 + p.numel()));
    const auto params = gru.named_parameters();
    EXPECT_EQ(params[0].first, "kernel");
    EXPECT_EQ(params[1].first, "recurrent_kernel");
    EXPECT_EQ(params[2].second.shape(), reset_after ? (Shape{2, 9}) : (Shape{9}));
    std::vector<Tensor> states;
    const Tensor last = reference_gru(x, params[0].second, params[1].second, params[2].second,
                                      reset_after, &states);
    const auto [y, h] = gru.call_with_state(x);
    EXPECT_LT(max_abs_diff(y, stack(states, 1)), 1e-12);
    EXPECT_LT(max_abs_diff(h, last), 1e-12);
    // go_backwards runs over the reversed steps and returns its outputs in that order.
    nn::GRU back(3, {.return_sequences = true, .go_backwards = true, .reset_after = reset_after});
    back.build(x.shape());
    back.to(DType::Float64);
    for (size_t k = 0; k < 3; ++k) back.parameters()[k].copy_(gru.parameters()[k]);
    EXPECT_LT(max_abs_diff(back(x), gru(flip(x, 1))), 1e-12);
  }
}

TEST(Gru, BidirectionalAlignsTheBackwardSteps) {
  manual_seed(13);
  auto inner = std::make_shared<nn::GRU>(4, nn::GRUOptions{.return_sequences = true});
  nn::Bidirectional bi(inner);
  const Tensor x = rand32({3, 6, 2});
  const Tensor y = bi(x);
  ASSERT_EQ(y.shape(), (Shape{3, 6, 8}));
  const auto names = bi.named_parameters();
  EXPECT_EQ(names[0].first, "forward_gru.kernel");
  EXPECT_EQ(names[3].first, "backward_gru.kernel");
  // The backward half at step t has read steps t..T-1: the forward GRU on the flipped input,
  // flipped back.
  nn::GRU fwd(4, {.return_sequences = true});
  fwd.build(x.shape());
  NoGradGuard no_grad;
  for (size_t k = 0; k < 3; ++k) fwd.parameters()[k].copy_(bi.parameters()[3 + k]);
  EXPECT_LT(max_abs_diff(y.slice(2, 4, 8), flip(fwd(flip(x, 1)), 1)), 1e-6);
  EXPECT_LT(max_abs_diff(y.slice(2, 0, 4), (*inner)(x)), 1e-6);
}

// Training steps eager and traced from the same weights and data agree bitwise.
TEST(Gru, EagerAndTracedTrainingAgreeBitwise) {
  expect_eager_and_traced_training_bitwise(
      [](nn::Sequential& m) {
        m.add(std::make_shared<nn::Bidirectional>(std::make_shared<nn::GRU>(
            5, nn::GRUOptions{.activation = "relu", .return_sequences = true})));
        m.add<nn::GRU>(4, nn::GRUOptions{.go_backwards = true, .reset_after = false});
        m.add<nn::Dense>(1);
      },
      14);
}

TEST(Gru, Errors) {
  EXPECT_THROW(nn::GRU(0), ValueError);
  EXPECT_THROW(nn::GRU(2, {.activation = "swish"}), ValueError);
  nn::GRU gru(2);
  gru(ones({1, 2, 3}));
  EXPECT_THROW(gru(ones({1, 2, 4})), ShapeError);
  EXPECT_THROW(gru(ones({1, 0, 3})), ShapeError);
  // cuDNN cannot compute this configuration, and a CPU tensor never takes it.
  nn::GRU cudnn(2, {.reset_after = false, .implementation = nn::RecurrentImplementation::Cudnn});
  EXPECT_THROW(cudnn(ones({1, 2, 3})), UnsupportedError);
  EXPECT_THROW(
      gru_cell(zeros({2, 7}), zeros({2, 7}), zeros({2, 2}), Activation::Tanh, Activation::Sigmoid),
      ShapeError);
}

TEST(Gru, EmptyBatch) {
  nn::GRU gru(3, {.return_sequences = true});
  EXPECT_EQ(gru(zeros({0, 4, 2})).shape(), (Shape{0, 4, 3}));
}

}  // namespace
}  // namespace encore
