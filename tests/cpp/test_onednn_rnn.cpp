// The CPU's fused LSTM and GRU (oneDNN's primitives, onednn_lstm / onednn_gru) against the
// composed layers (lstm_sequence, gru_sequence): outputs and every gradient in float32 for each
// option and Bidirectional, when the layers take them, and eager/traced training bit for bit.
// The ops themselves, with initial states, are checked against the step-by-step cells by the op
// table (MatchesItsReference).
#include "graph/lengths.h"
#include "graph/trace.h"
#include "helpers.h"
#include "nn/gru.h"
#include "nn/layers.h"
#include "nn/losses.h"
#include "nn/lstm.h"
#include "nn/optim.h"
#include "ops/dispatch.h"
#include "ops/nn.h"

namespace encore {
namespace {

using test::expect_close;
using test::expect_eager_and_traced_training_bitwise;
using test::rand32;

// The output of `m` on x and the gradients of a weighted sum of it: x's, then the parameters'.
std::vector<Tensor> output_and_gradients(nn::Module& m, const Tensor& x0) {
  const Tensor x = x0.clone().set_requires_grad(true);
  const Tensor y = m(x);
  sum(y * rand32(y.shape(), 77)).backward();
  std::vector<Tensor> r{y.detach(), x.grad()};
  for (Tensor& p : m.parameters()) {
    r.push_back(p.grad());
    p.set_grad(Tensor());
  }
  return r;
}

void expect_fused_matches_composed(nn::Module& fused, nn::Module& composed, const Tensor& x) {
  composed.build(x.shape());
  fused.build(x.shape());
  {
    NoGradGuard no_grad;
    for (size_t i = 0; i < fused.parameters().size(); ++i)
      composed.parameters()[i].copy_(fused.parameters()[i]);
  }
  const auto want = output_and_gradients(composed, x), got = output_and_gradients(fused, x);
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    expect_close(want[i], got[i], 1e-4, "output/gradient " + std::to_string(i));
  }
}

TEST(OnednnLstm, LayerMatchesTheComposedOne) {
  const Tensor x = rand32({3, 7, 5}, 3);
  for (bool seq : {false, true})
    for (bool reverse : {false, true}) {
      SCOPED_TRACE(testing::Message() << "return_sequences " << seq << " reverse " << reverse);
      manual_seed(21);
      nn::LSTM fused(6, {.return_sequences = seq, .reverse = reverse});
      nn::LSTM composed(6, {.return_sequences = seq,
                            .reverse = reverse,
                            .implementation = nn::RecurrentImplementation::Composed});
      expect_fused_matches_composed(fused, composed, x);
      EXPECT_TRUE(fused.uses_onednn(x));
      EXPECT_FALSE(fused.uses_cudnn(x));
      EXPECT_FALSE(composed.uses_onednn(x));
    }
  manual_seed(22);
  nn::Bidirectional fused(std::make_shared<nn::LSTM>(4, nn::LSTMOptions{.return_sequences = true}));
  nn::Bidirectional composed(std::make_shared<nn::LSTM>(
      4, nn::LSTMOptions{.return_sequences = true,
                         .implementation = nn::RecurrentImplementation::Composed}));
  expect_fused_matches_composed(fused, composed, x);
}

TEST(OnednnGru, LayerMatchesTheComposedOne) {
  const Tensor x = rand32({3, 7, 5}, 4);
  for (bool seq : {false, true})
    for (bool back : {false, true}) {
      SCOPED_TRACE(testing::Message() << "return_sequences " << seq << " go_backwards " << back);
      manual_seed(31);
      nn::GRU fused(6, {.return_sequences = seq, .go_backwards = back});
      nn::GRU composed(6, {.return_sequences = seq,
                           .go_backwards = back,
                           .implementation = nn::RecurrentImplementation::Composed});
      expect_fused_matches_composed(fused, composed, x);
      EXPECT_TRUE(fused.uses_onednn(x));
      EXPECT_FALSE(composed.uses_onednn(x));
    }
  manual_seed(32);
  nn::Bidirectional fused(std::make_shared<nn::GRU>(4, nn::GRUOptions{.return_sequences = true}));
  nn::Bidirectional composed(std::make_shared<nn::GRU>(
      4, nn::GRUOptions{.return_sequences = true,
                        .implementation = nn::RecurrentImplementation::Composed}));
  expect_fused_matches_composed(fused, composed, x);
  EXPECT_FALSE(nn::GRU(3, {.reset_after = false}).uses_onednn(x));
  EXPECT_FALSE(nn::GRU(3, {.activation = "relu"}).uses_onednn(x));
}

TEST(OnednnLstm, OtherConfigurationsStayComposed) {
  const Tensor x = rand32({2, 3, 4});
  EXPECT_FALSE(nn::LSTM(3, {.activation = "relu"}).uses_onednn(x));
  EXPECT_FALSE(nn::LSTM(3, {.recurrent_activation = "hard_sigmoid"}).uses_onednn(x));
  EXPECT_FALSE(nn::LSTM(3).uses_onednn(x.to(DType::Float64)));
  EXPECT_FALSE(nn::LSTM(3).uses_onednn(zeros({0, 3, 4})));
  // A bucketed call masks the padding: the composed path.
  graph::LengthScope scope;
  graph::set_lengths(x, {.length = full({1}, 2, DType::Int64), .axis = 1, .of_call = nullptr});
  EXPECT_FALSE(nn::LSTM(3).uses_onednn(x));
  // Asking for cuDNN on the CPU is an error, as before.
  nn::LSTM cudnn(3, {.implementation = nn::RecurrentImplementation::Cudnn});
  EXPECT_THROW(cudnn(x), UnsupportedError);
}

TEST(OnednnRnn, EagerAndTracedTrainingAgreeBitwise) {
  expect_eager_and_traced_training_bitwise(
      [](nn::Sequential& m) {
        m.add(std::make_shared<nn::Bidirectional>(
            std::make_shared<nn::LSTM>(5, nn::LSTMOptions{.return_sequences = true})));
        m.add<nn::LSTM>(4, nn::LSTMOptions{.return_sequences = true, .reverse = true});
        m.add<nn::GRU>(4, nn::GRUOptions{.go_backwards = true});
        m.add<nn::Dense>(1);
      },
      24);
}

TEST(OnednnLstm, Errors) {
  const LstmAttrs attrs{Activation::Tanh, Activation::Sigmoid};
  const std::vector<Tensor> in{rand32({2, 3, 4}), zeros({2, 5}),   zeros({2, 5}),
                               rand32({4, 20}),   rand32({5, 20}), zeros({20})};
  EXPECT_THROW(dispatch(op("onednn_lstm"), in, LstmAttrs{Activation::Relu, Activation::Sigmoid}),
               UnsupportedError);
  std::vector<Tensor> f64;
  for (const Tensor& t : in) f64.push_back(t.to(DType::Float64));
  EXPECT_THROW(dispatch(op("onednn_lstm"), f64, attrs), DTypeError);
  std::vector<Tensor> wrong = in;
  wrong[4] = zeros({5, 16});
  EXPECT_THROW(dispatch(op("onednn_lstm"), wrong, attrs), ShapeError);
}

}  // namespace
}  // namespace encore
