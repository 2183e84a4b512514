// Sizes and values at the limits: element counts that overflow int64, slices with huge steps,
// printing long empty tensors.
#include <limits>

#include "helpers.h"
#include "nn/layers.h"
#include "nn/lstm.h"

namespace encore {
namespace {

using test::expect_values;

template <class E, class F> std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
    return {};
  }
  ADD_FAILURE() << "no exception";
  return {};
}

#define EXPECT_ERROR(Kind, expr, fragment)                                  \
  do {                                                                      \
    const std::string msg = message_of<Kind>([&] { (void)(expr); });        \
    EXPECT_NE(msg.find(fragment), std::string::npos) << "message: " << msg; \
  } while (0)

constexpr int64_t k2(int p) { return int64_t{1} << p; }
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

TEST(Limits, ElementCountsThatOverflowAreShapeErrors) {
  // 2^33 * 2^31 = 2^64 wrapped to 0 elements, and reading the result crashed.
  const Tensor a = zeros({1, 1}).expand({k2(33), 1}), b = zeros({1, 1}).expand({1, k2(31)});
  EXPECT_ERROR(ShapeError, a + b, "[add] shape (8589934592, 2147483648) has too many elements");
  EXPECT_ERROR(ShapeError, zeros({1, 1}).expand({k2(33), k2(31)}), "[expand] shape (8589934592, 2147483648)");
  EXPECT_ERROR(ShapeError, zeros({k2(40), k2(40)}), "[full] shape");
  EXPECT_ERROR(ShapeError, uniform({k2(40), k2(40)}), "[uniform] shape");
  EXPECT_ERROR(ShapeError, Tensor::empty({k2(40), k2(40)}), "[empty] shape");
  EXPECT_ERROR(ShapeError, ones({4}).reshape({k2(40), k2(40)}), "[reshape] shape");
  EXPECT_ERROR(ShapeError, ones({4}).reshape({-1, k2(40), k2(40)}), "[reshape] shape");
  EXPECT_ERROR(ShapeError, from_vector<float>({1}, {k2(40), k2(40)}), "[from_vector] shape");
  EXPECT_ERROR(ShapeError, arange(0, 1e30), "[arange] 1e+30 elements are too many");
  EXPECT_ERROR(ShapeError, zeros({1}).expand({-1}), "[expand] negative dimension in (-1,)");
  // The limit: 2^60 - 1 elements, so that byte sizes fit in int64 (a view costs no memory).
  EXPECT_EQ(zeros({1}).expand({kMaxNumel}).numel(), kMaxNumel);
  EXPECT_ERROR(ShapeError, zeros({1}).expand({kMaxNumel + 1}), "too many elements");
  EXPECT_ERROR(ShapeError, zeros({1, 1}).expand({2, kMaxNumel / 2 + 1}), "too many elements");
  // Size-0 dims do not count: (2^40, 0) is an ordinary empty tensor.
  EXPECT_EQ(zeros({k2(40), 0}).numel(), 0);
  EXPECT_EQ((zeros({k2(40), 0}) + ones({1})).shape(), (Shape{k2(40), 0}));
  EXPECT_EQ(checked_numel({k2(40), 0, k2(19)}, "test"), 0);
  EXPECT_ERROR(ShapeError, checked_numel({k2(40), 0, k2(40)}, "test"), "[test] shape");
  expect_values(ones({2}) + ones({2}), {2, 2});
}

TEST(Limits, LayersWithTooManyWeightsAreShapeErrors) {
  // The kernel (2^21, 2^22, 2^21) has 2^64 elements: it was allocated with 0 bytes.
  nn::Conv1D conv(k2(21), k2(21));
  EXPECT_ERROR(ShapeError, conv.build({1, k2(22), k2(22)}),
               "[conv1d] shape (2097152, 4194304, 2097152) has too many elements");
  nn::Dense dense(k2(40));
  EXPECT_ERROR(ShapeError, dense.build({1, k2(40)}), "[dense] shape");
  nn::LSTM lstm(k2(40));
  EXPECT_ERROR(ShapeError, lstm.build({1, 2, k2(40)}), "[lstm] shape");
  nn::Flatten flatten;
  EXPECT_ERROR(ShapeError, flatten.build({2, k2(40), k2(40)}), "[flatten] shape");
}

TEST(Limits, SlicesWithHugeSteps) {
  // (stop - start + step - 1) / step overflowed into a negative length.
  const Tensor t = arange(0, 5, 1, DType::Int64);
  for (int64_t step : {kInt64Max, kInt64Max - 1, k2(62)}) {
    expect_values(t.slice(0, 0, 2, step), {0});
    expect_values(t.slice(0, 1, 5, step), {1});
    EXPECT_EQ(t.slice(0, 5, 5, step).shape(), (Shape{0}));
  }
  expect_values(t.slice(0, 0, 5, 3), {0, 3});
  expect_values(t.slice(0, 1, 5, 4), {1});
  const Tensor m = arange(0, 6).reshape({2, 3});
  expect_values(m.slice(1, 1, 3, kInt64Max), {1, 4});
  // The gradient scatters back through slice_grad with the same step.
  Tensor x = arange(0, 5, 1, DType::Float64);
  x.set_requires_grad();
  sum(x.slice(0, 1, 5, kInt64Max) * 2.0).backward();
  expect_values(x.grad(), {0, 2, 0, 0, 0});
}

TEST(Limits, PrintingSummarizesLongAxesEvenWhenEmpty) {
  // (2^31, 0) has no elements but would print 2^31 "[]".
  EXPECT_EQ(zeros({k2(31), 0}).str(),
            "tensor([[],\n        [],\n        [],\n        ...,\n        [],\n        [],\n        []], "
            "dtype=float32)");
  EXPECT_EQ(zeros({0, k2(31)}).str(), "tensor([], dtype=float32)");
  EXPECT_EQ(zeros({2, 0}).str(), "tensor([[],\n        []], dtype=float32)");
  EXPECT_LT(zeros({1}).expand({kMaxNumel}).str().size(), 100u);
}

}  // namespace
}  // namespace encore
