// Zero-size tensors: every op gives an empty (or, for reductions, a well-defined) result or a
// clear error, never unbounded recursion or an out-of-bounds read.
#include <cmath>

#include "core/modes.h"
#include "helpers.h"
#include "nn/layers.h"
#include "nn/losses.h"
#include "nn/lstm.h"

namespace encore {
namespace {

using test::expect_values;

TEST(Empty, ContiguityAgreesWithContiguousStrides) {
  for (const Shape& s :
       {Shape{2, 0}, Shape{0, 3}, Shape{0}, Shape{3, 0, 2}, Shape{1, 0, 1}, Shape{}}) {
    EXPECT_TRUE(is_contiguous(s, contiguous_strides(s))) << s.str();
    EXPECT_TRUE(Tensor::empty(s).is_contiguous()) << s.str();
  }
  // A transposed empty tensor has no layout to fix: contiguous() returns it as it is.
  const Tensor t = zeros({2, 0}).transpose(0, 1);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_TRUE(t.contiguous().same(t));
}

TEST(Empty, SoftmaxAndLogSoftmax) {
  for (const Shape& s : {Shape{2, 0}, Shape{0, 3}, Shape{0}}) {
    for (int64_t axis : {int64_t{0}, int64_t{-1}}) {
      EXPECT_EQ(softmax(zeros(s), axis).shape(), s);
      EXPECT_EQ(log_softmax(zeros(s), axis).shape(), s);
      EXPECT_EQ(softmax(zeros(s, DType::Float64), axis).shape(), s);
    }
  }
  // A strided (transposed) empty input goes through the contiguity check too.
  EXPECT_EQ(softmax(zeros({0, 4}).transpose(0, 1)).shape(), (Shape{4, 0}));
  Tensor x = zeros({3, 0});
  x.set_requires_grad();
  sum(log_softmax(x) + softmax(x)).backward();
  EXPECT_EQ(x.grad().shape(), (Shape{3, 0}));
}

TEST(Empty, ReductionsFollowNumPy) {
  expect_values(sum(zeros({2, 0}), {1}), {0, 0});
  expect_values(sum(zeros({0, 2}, DType::Int64), {0}), {0, 0});
  EXPECT_EQ(sum(zeros({0, 2}), {1}).shape(), (Shape{0}));
  EXPECT_EQ(sum(zeros({0})).item(), 0.0);
  // The mean of nothing is NaN, as in NumPy.
  for (double v : mean(zeros({2, 0}), {1}).to_vector<double>()) EXPECT_TRUE(std::isnan(v));
  EXPECT_TRUE(std::isnan(mean(zeros({0, 3})).item()));
  EXPECT_THROW(max(zeros({2, 0}), {1}), ShapeError);
  EXPECT_EQ(max(zeros({0, 2}), {1}).shape(), (Shape{0}));
}

TEST(Empty, ElementwiseAndDataMovement) {
  const Tensor e = zeros({0, 3});
  EXPECT_EQ((e + ones({3})).shape(), (Shape{0, 3}));
  EXPECT_EQ((e * 2.0).shape(), (Shape{0, 3}));
  EXPECT_EQ(exp(e.transpose(0, 1)).shape(), (Shape{3, 0}));
  EXPECT_EQ(concat({e, ones({2, 3})}, 0).shape(), (Shape{2, 3}));
  EXPECT_EQ(flip(e, 0).shape(), (Shape{0, 3}));
  EXPECT_EQ(e.reshape({3, 0, 5}).shape(), (Shape{3, 0, 5}));
  EXPECT_EQ(matmul(zeros({2, 0}), zeros({0, 3})).to_vector<float>(), std::vector<float>(6, 0.0f));
  EXPECT_EQ(gather_last(zeros({0, 4}), zeros({0}, DType::Int64)).shape(), (Shape{0}));
  EXPECT_EQ(gather_last(zeros({0, 0}), zeros({0}, DType::Int64)).shape(), (Shape{0}));
  EXPECT_THROW(gather_last(zeros({2, 0}), zeros({2}, DType::Int64)), ValueError);
  EXPECT_EQ(scatter_last(zeros({0}), zeros({0}, DType::Int64), 4).shape(), (Shape{0, 4}));
  Tensor filled = zeros({2, 0});
  filled.fill_(3.0);
  filled.copy_(ones({2, 0}));
  EXPECT_EQ(filled.to(DType::Int32).shape(), (Shape{2, 0}));
}

TEST(Empty, Dropout) {
  for (const Shape& s : {Shape{0, 3}, Shape{2, 0}}) {
    Tensor x = zeros(s);
    x.set_requires_grad();
    const Tensor y = dropout(x, 0.5, true);
    EXPECT_EQ(y.shape(), s);
    sum(y).backward();
    EXPECT_EQ(x.grad().shape(), s);
  }
  nn::Dropout layer(0.5);
  EXPECT_EQ(layer(zeros({0, 7})).shape(), (Shape{0, 7}));
}

TEST(Empty, Conv1d) {
  // No batch entries, no filters: empty outputs. No input channels: a sum over nothing.
  Tensor x = zeros({0, 5, 3}), w = ones({2, 3, 4});
  x.set_requires_grad();
  w.set_requires_grad();
  const Tensor y = conv1d(x, w);
  EXPECT_EQ(y.shape(), (Shape{0, 4, 4}));
  sum(y).backward();
  EXPECT_EQ(x.grad().shape(), (Shape{0, 5, 3}));
  expect_values(w.grad(), std::vector<double>(24, 0.0));
  EXPECT_EQ(conv1d(ones({2, 5, 3}), ones({2, 3, 0})).shape(), (Shape{2, 4, 0}));
  expect_values(conv1d(ones({1, 3, 0}), ones({2, 0, 2})), {0, 0, 0, 0});
  // A sequence without steps is too short, unless explicit padding makes room: zeros then.
  EXPECT_THROW(conv1d(ones({1, 0, 3}), ones({3, 3, 2}), 1, Padding::same()), ShapeError);
  expect_values(conv1d(ones({1, 0, 3}), ones({1, 3, 2}), 1, Padding::explicit_(1, 0)), {0, 0});
  EXPECT_EQ(conv1d(zeros({0, 5, 3}, DType::Float64), ones({2, 3, 4}, DType::Float64)).shape(),
            (Shape{0, 4, 4}));

  nn::Conv1D layer(4, 3, {.padding = "same"});
  EXPECT_EQ(layer(zeros({0, 6, 2})).shape(), (Shape{0, 6, 4}));
}

TEST(Empty, Lstm) {
  // An empty batch runs; a sequence without steps has no last output and is an error.
  nn::LSTM lstm(3);
  Tensor x = zeros({0, 4, 2});
  x.set_requires_grad();
  const Tensor h = lstm(x);
  EXPECT_EQ(h.shape(), (Shape{0, 3}));
  sum(h).backward();
  EXPECT_EQ(x.grad().shape(), (Shape{0, 4, 2}));
  nn::LSTM seq(3, {.return_sequences = true});
  EXPECT_EQ(seq(zeros({0, 4, 2})).shape(), (Shape{0, 4, 3}));
  EXPECT_THROW(lstm(zeros({2, 0, 2})), ShapeError);
  const auto [hc, cc] =
      lstm_cell(zeros({0, 12}), zeros({0, 3}), Activation::Tanh, Activation::Sigmoid);
  EXPECT_EQ(hc.shape(), (Shape{0, 3}));
}

TEST(Empty, LossesOfAnEmptyBatchAreNaN) {
  // The mean over no samples, as Keras (a NumPy-style mean) computes it; the gradient is empty.
  Tensor p = zeros({0, 1});
  p.set_requires_grad();
  const Tensor bce = nn::binary_crossentropy(zeros({0, 1}), p);
  EXPECT_TRUE(std::isnan(bce.item()));
  bce.backward();
  EXPECT_EQ(p.grad().shape(), (Shape{0, 1}));
  EXPECT_TRUE(std::isnan(nn::binary_crossentropy(zeros({0, 1}), zeros({0, 1}), true).item()));
  EXPECT_TRUE(std::isnan(nn::mean_squared_error(zeros({0, 3}), zeros({0, 3})).item()));
  Tensor logits = zeros({0, 5});
  logits.set_requires_grad();
  const Tensor sce = nn::sparse_categorical_crossentropy(zeros({0}, DType::Int64), logits, true);
  EXPECT_TRUE(std::isnan(sce.item()));
  sce.backward();
  EXPECT_EQ(logits.grad().shape(), (Shape{0, 5}));
}

TEST(Empty, Printing) {
  EXPECT_EQ(zeros({2, 0}).str(), "tensor([[],\n        []], dtype=float32)");
  EXPECT_EQ(zeros({0}).str(), "tensor([], dtype=float32)");
}

}  // namespace
}  // namespace encore
