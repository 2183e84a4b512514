// Sizes and values at the limits: element counts that overflow int64, slices with huge steps,
// printing long empty tensors, integer arithmetic that wraps, float -> integer casts, NaNs through
// fused activations. The sanitizer build (UBSan, float-cast-overflow included) runs these too.
#include <cmath>
#include <limits>

#include "helpers.h"
#include "nn/layers.h"
#include "nn/lstm.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"

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
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
constexpr int32_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int32_t kInt32Min = std::numeric_limits<int32_t>::min();

template <class T> std::vector<T> values(const Tensor& t) { return t.to_vector<T>(); }
template <class T> Tensor ints(std::vector<T> v) {
  return from_vector<T>(v, {static_cast<int64_t>(v.size())});
}

TEST(Limits, ElementCountsThatOverflowAreShapeErrors) {
  // 2^33 * 2^31 = 2^64 wrapped to 0 elements, and reading the result crashed.
  const Tensor a = zeros({1, 1}).expand({k2(33), 1}), b = zeros({1, 1}).expand({1, k2(31)});
  EXPECT_ERROR(ShapeError, a + b, "[add] shape (8589934592, 2147483648) has too many elements");
  EXPECT_ERROR(ShapeError, zeros({1, 1}).expand({k2(33), k2(31)}),
               "[expand] shape (8589934592, 2147483648)");
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
  EXPECT_EQ(
      zeros({k2(31), 0}).str(),
      "tensor([[],\n        [],\n        [],\n        ...,\n        [],\n        [],\n        []], "
      "dtype=float32)");
  EXPECT_EQ(zeros({0, k2(31)}).str(), "tensor([], dtype=float32)");
  EXPECT_EQ(zeros({2, 0}).str(), "tensor([[],\n        []], dtype=float32)");
  EXPECT_LT(zeros({1}).expand({kMaxNumel}).str().size(), 100u);
}

// Signed overflow is undefined in C++: int32/int64 ops wrap modulo 2^bits instead, as in
// NumPy, on the contiguous and the strided paths, in place, and in sums.
TEST(Limits, IntegerArithmeticWraps) {
  using V = std::vector<int64_t>;
  const Tensor a = ints<int64_t>({kInt64Max, kInt64Min, kInt64Min, -1});
  EXPECT_EQ(values<int64_t>(a + 1.0), (V{kInt64Min, kInt64Min + 1, kInt64Min + 1, 0}));
  EXPECT_EQ(values<int64_t>(a + a), (V{-2, 0, 0, -2}));
  EXPECT_EQ(values<int64_t>(a - ints<int64_t>({-1, 1, 1, 1})),
            (V{kInt64Min, kInt64Max, kInt64Max, -2}));
  EXPECT_EQ(values<int64_t>(a * ints<int64_t>({2})), (V{-2, 0, 0, -2}));
  EXPECT_EQ(values<int64_t>(a * 3.0), (V{kInt64Max - 2, kInt64Min, kInt64Min, -3}));
  EXPECT_EQ(values<int64_t>(-a), (V{kInt64Min + 1, kInt64Min, kInt64Min, 1}));
  EXPECT_EQ(values<int64_t>(abs(a)), (V{kInt64Max, kInt64Min, kInt64Min, 1}));
  EXPECT_EQ(values<int64_t>(a / ints<int64_t>({-1})), (V{-kInt64Max, kInt64Min, kInt64Min, 1}));
  // kInt64Max + kInt64Min - 1 + kInt64Min = kInt64Max - 1 (mod 2^64).
  EXPECT_EQ(sum(a).to_vector<int64_t>()[0], kInt64Max - 1);
  // Strided operands (a transposed view) take the general loops.
  const Tensor m = ints<int64_t>({kInt64Max, 1, kInt64Max, 2}).reshape({2, 2}).transpose(0, 1);
  EXPECT_EQ(values<int64_t>(m + ones({2, 2}, DType::Int64)), (V{kInt64Min, kInt64Min, 2, 3}));
  EXPECT_EQ(values<int64_t>(sum(m, {1})), (V{-2, 3}));
  EXPECT_EQ(values<int64_t>(sum(m, {0})), (V{kInt64Min, kInt64Min + 1}));

  using W = std::vector<int32_t>;
  const Tensor b = ints<int32_t>({kInt32Max, kInt32Min, 7});
  EXPECT_EQ(values<int32_t>(b + 1.0), (W{kInt32Min, kInt32Min + 1, 8}));
  EXPECT_EQ(values<int32_t>(b * b), (W{1, 0, 49}));
  EXPECT_EQ(values<int32_t>(b - ints<int32_t>({-1})), (W{kInt32Min, kInt32Min + 1, 8}));
  EXPECT_EQ(values<int32_t>(-b), (W{kInt32Min + 1, kInt32Min, -7}));
  EXPECT_EQ(sum(ints<int32_t>({kInt32Max, 1})).to_vector<int32_t>()[0], kInt32Min);

  // In place: add_ (gradient accumulation) and add_scalar_.
  Tensor t = ints<int64_t>({kInt64Max, 5});
  const Tensor in[] = {t, ints<int64_t>({1})};
  dispatch(op("add_"), in);
  EXPECT_EQ(values<int64_t>(t), (V{kInt64Min, 6}));
  const Tensor self[] = {t};
  dispatch(op("add_scalar_"), self, ScalarAttrs{-1.0});
  EXPECT_EQ(values<int64_t>(t), (V{kInt64Max, 5}));
}

TEST(Limits, FloatToIntegerCastsAreDefined) {
  // NaN -> 0; beyond the range -> its ends; otherwise truncation toward zero.
  const std::vector<double> v{NAN,
                              INFINITY,
                              -INFINITY,
                              1e300,
                              -1e300,
                              2.9,
                              -2.9,
                              9.3e18,
                              -9.3e18,
                              3e9,
                              9223372036854775808.0,
                              -9223372036854775808.0};
  for (DType from : {DType::Float64, DType::Float32}) {
    const Tensor x = from_vector(v, {12}).to(from);
    EXPECT_EQ(values<int64_t>(x.to(DType::Int64)),
              (std::vector<int64_t>{0, kInt64Max, kInt64Min, kInt64Max, kInt64Min, 2, -2, kInt64Max,
                                    kInt64Min, 3000000000, kInt64Max, kInt64Min}))
        << name(from);
    EXPECT_EQ(values<int32_t>(x.to(DType::Int32)),
              (std::vector<int32_t>{0, kInt32Max, kInt32Min, kInt32Max, kInt32Min, 2, -2, kInt32Max,
                                    kInt32Min, kInt32Max, kInt32Max, kInt32Min}))
        << name(from);
  }
  // The ends of the int32 range are exact in float64; just beyond them saturates.
  EXPECT_EQ(values<int32_t>(
                from_vector<double>({2147483647.0, -2147483648.0, 2147483648.0, -2147483649.0}, {4})
                    .to(DType::Int32)),
            (std::vector<int32_t>{kInt32Max, kInt32Min, kInt32Max, kInt32Min}));
}

// Scalars hold int64 values exactly (they were doubles: 2^62 + 1 became 2^62).
TEST(Limits, Int64ScalarsAreExact) {
  using V = std::vector<int64_t>;
  constexpr int64_t big = k2(61) + 1;
  EXPECT_EQ(values<int64_t>(full({2}, big, DType::Int64)), (V{big, big}));
  Tensor t = zeros({2}, DType::Int64);
  t.fill_(big);
  EXPECT_EQ(values<int64_t>(t), (V{big, big}));
  EXPECT_EQ(values<int64_t>(t + big), (V{2 * big, 2 * big}));
  EXPECT_EQ(values<int64_t>(t - big), (V{0, 0}));
  EXPECT_EQ(values<int64_t>(ones({1}, DType::Int64) * big), (V{big}));
  EXPECT_EQ(values<int64_t>(big - t), (V{0, 0}));
  EXPECT_EQ(values<int64_t>(clip(ints<int64_t>({0, kInt64Max}), big, big + 2)), (V{big, big + 2}));
  EXPECT_EQ(values<int64_t>(arange(big, big + 3, 1, DType::Int64)), (V{big, big + 1, big + 2}));
  EXPECT_EQ(values<int64_t>(arange(kInt64Max - 2, kInt64Max, 1, DType::Int64)),
            (V{kInt64Max - 2, kInt64Max - 1}));
  EXPECT_EQ(arange(kInt64Min, kInt64Max, k2(62), DType::Int64).numel(), 4);
  EXPECT_EQ(values<int64_t>(arange(10, 0, -4, DType::Int64)), (V{10, 6, 2}));
  // In place, as optimizers count steps.
  const Tensor self[] = {t};
  dispatch(op("add_scalar_"), self, ScalarAttrs{big});
  EXPECT_EQ(values<int64_t>(t), (V{2 * big, 2 * big}));
  // Floating tensors take the nearest value.
  EXPECT_EQ(full({1}, big, DType::Float64).to_vector<double>()[0], static_cast<double>(big));
  EXPECT_EQ(Scalar(big).str(), "2305843009213693953");
  EXPECT_EQ(Scalar(2.5).str(), "2.5");
  EXPECT_EQ((-Scalar(kInt64Min)).d, 9223372036854775808.0);
}

// NaN and +-inf have no integer value (fill_(nan) gave INT64_MIN); values beyond the dtype's
// range neither. Fractions truncate toward zero, as NumPy's and PyTorch's fill do.
TEST(Limits, ScalarsAnIntegerTensorCannotHoldAreValueErrors) {
  for (DType dt : {DType::Int64, DType::Int32}) {
    Tensor t = zeros({2}, dt);
    for (double bad : {double(NAN), double(INFINITY), -double(INFINITY), 1e300}) {
      EXPECT_ERROR(ValueError, t.fill_(bad), "[fill_] the value ");
      EXPECT_ERROR(ValueError, full({1}, bad, dt), "[full] the value");
      EXPECT_ERROR(ValueError, t + bad, "[add_scalar] the value");
      EXPECT_ERROR(ValueError, t * bad, "[mul_scalar] the value");
      EXPECT_ERROR(ValueError, clip(t, bad, bad), "[clip] the value");
      const Tensor self[] = {t};
      EXPECT_ERROR(ValueError, dispatch(op("add_scalar_"), self, ScalarAttrs{bad}),
                   "[add_scalar_] the value");
    }
    EXPECT_ERROR(ValueError, t.fill_(NAN),
                 std::string("cannot be stored in an ") + std::string(name(dt)) + " tensor");
    EXPECT_ERROR(ValueError, t.fill_(1e300), "(out of range)");
    t.fill_(2.5);  // assignment truncates, as in NumPy and PyTorch
    expect_values(t, {2, 2});
    t.fill_(-2.9);
    expect_values(t, {-2, -2});
    // An operand must be whole: NumPy and PyTorch would compute these in floating point.
    const Tensor self[] = {t};
    for (const std::string op_name : {"add_scalar", "mul_scalar", "lt", "le", "gt", "ge", "eq",
                                      "ne", "div", "add_scalar_", "clip"}) {
      const auto run = [&] {
        if (op_name == "add_scalar") return t + 1.9;
        if (op_name == "mul_scalar") return t * 2.5;
        if (op_name == "lt") return lt(t, 1.5);
        if (op_name == "le") return le(t, 1.5);
        if (op_name == "gt") return gt(t, 1.5);
        if (op_name == "ge") return ge(t, 1.5);
        if (op_name == "eq") return eq(t, 1.5);
        if (op_name == "ne") return ne(t, 1.5);
        if (op_name == "div") return t / 2.5;
        if (op_name == "clip") return clip(t, 0.5, 3.0);
        dispatch(op("add_scalar_"), self, ScalarAttrs{0.5});
        return t;
      };
      EXPECT_ERROR(ValueError, run(), "[" + op_name + "] the value ");
      EXPECT_ERROR(ValueError, run(), "is not a whole number");
    }
    expect_values(t + 2.0, {0, 0});  // whole values given as doubles are fine
    expect_values(lt(t, -1.0), {1, 1});
    expect_values(t / 2.0, {-1, -1});
  }
  Tensor i32 = zeros({1}, DType::Int32);
  EXPECT_ERROR(ValueError, i32.fill_(k2(31)),
               "[fill_] the value 2147483648 cannot be stored in an int32 tensor (out of range)");
  EXPECT_ERROR(ValueError, i32 + k2(40), "[add_scalar] the value 1099511627776");
  i32.fill_(k2(31) - 1);
  EXPECT_EQ(values<int32_t>(i32), std::vector<int32_t>{kInt32Max});
  i32.fill_(-2147483648.9);
  EXPECT_EQ(values<int32_t>(i32), std::vector<int32_t>{kInt32Min});
  EXPECT_ERROR(ValueError, zeros({1}, DType::Int64).fill_(9223372036854775808.0), "out of range");
  EXPECT_ERROR(ValueError, arange(0, 4e9, 1.5e9, DType::Int32), "[arange] the value 3e+09");
  EXPECT_ERROR(ValueError, arange(0, k2(40), k2(39), DType::Int32),
               "[arange] the value 549755813888");
  // Floating tensors take anything.
  EXPECT_TRUE(std::isnan(full({1}, NAN).item()));
  Tensor f = zeros({1}, DType::Float64);
  f.fill_(INFINITY);
  EXPECT_EQ(f.item(), INFINITY);
}

// A NaN reaching a fused op's activation stays NaN: the oneDNN post-ops used are those whose
// library form keeps NaNs (ops/activation.h, LibraryForm), the others run as our pass. Every
// fusable activation of the table, Conv1D and Dense. Which outputs are NaN follows from the
// geometry alone (the windows and rows that read x[0, 3, 1]); the others are checked against the
// same layer computed in float64 (the reference loops, the float64 BLAS) and activated there.
TEST(Limits, FusedActivationsKeepNaNs) {
  std::vector<float> xs(2 * 9 * 4);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(i % 7) * 0.3f - 1.0f;
  xs[(0 * 9 + 3) * 4 + 1] = NAN;  // batch 0, step 3, channel 1
  const Tensor x = from_vector(xs, {2, 9, 4});
  const Tensor w = randn({3, 4, 5}), b = randn({5}), wd = randn({4, 5});
  const Tensor x64 = x.to(DType::Float64), b64 = b.to(DType::Float64);
  // Output (batch, step) positions whose inputs include the NaN: valid conv windows t..t+2 and
  // dense rows.
  const auto conv_nan = [](int64_t batch, int64_t t) { return batch == 0 && t <= 3 && 3 <= t + 2; };
  const auto dense_nan = [](int64_t batch, int64_t t) { return batch == 0 && t == 3; };
  int checked = 0;
  for (int i = 0; i < kNumActivations; ++i) {
    const Activation a = static_cast<Activation>(i);
    if (!fusable_activation(a)) continue;
    ++checked;
    struct Case {
      Tensor fused, reference;
      bool (*nan_at)(int64_t, int64_t);
    };
    const Case cases[] = {
        {conv1d_fused(x, w, b, 1, Padding::valid(), 1, a),
         activation(conv1d(x64, w.to(DType::Float64)) + b64, a), +conv_nan},
        {dense(x, wd, b, a), activation(matmul(x64, wd.to(DType::Float64)) + b64, a), +dense_nan}};
    for (const Case& c : cases) {
      const auto f = c.fused.to_vector<double>(), r = c.reference.to_vector<double>();
      ASSERT_EQ(f.size(), r.size());
      const int64_t steps = c.fused.shape()[1], units = c.fused.shape()[2];
      for (size_t k = 0; k < f.size(); ++k) {
        const int64_t batch = k / (steps * units), t = k / units % steps;
        ASSERT_EQ(std::isnan(f[k]), c.nan_at(batch, t)) << name(a) << " element " << k;
        if (!std::isnan(f[k])) {
          EXPECT_NEAR(f[k], r[k], 1e-5 * (1 + std::fabs(r[k]))) << name(a) << " element " << k;
        }
      }
    }
  }
  EXPECT_EQ(checked, 5);  // linear, tanh, sigmoid, relu, hard_sigmoid
}

}  // namespace
}  // namespace encore
