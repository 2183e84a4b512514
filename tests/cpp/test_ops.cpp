// Forward results of every op family against hand-computed values or float64 references.
#include "core/ledger.h"
#include "helpers.h"
#include "ops/conv.h"
#include "ops/dispatch.h"
#include "ops/epilogue.h"

namespace encore {
namespace {

using test::expect_values;
using test::max_abs_diff;
using test::rand32;
using test::rand64;

TEST(Elementwise, UnaryValues) {
  const Tensor x = from_vector<double>({-2, -0.5, 0.5, 3}, {4});
  expect_values(neg(x), {2, 0.5, -0.5, -3});
  expect_values(relu(x), {0, 0, 0.5, 3});
  expect_values(abs(x), {2, 0.5, 0.5, 3});
  expect_values(leaky_relu(x, 0.1), {-0.2, -0.05, 0.5, 3});
  expect_values(clip(x, -1, 1), {-1, -0.5, 0.5, 1});
  expect_values(x * 2.0 + 1.0, {-3, 0, 2, 7});
  expect_values(exp(x), {std::exp(-2), std::exp(-0.5), std::exp(0.5), std::exp(3)}, 1e-12);
  expect_values(tanh(x), {std::tanh(-2), std::tanh(-0.5), std::tanh(0.5), std::tanh(3)}, 1e-12);
  expect_values(sigmoid(x),
                {1 / (1 + std::exp(2)), 1 / (1 + std::exp(0.5)), 1 / (1 + std::exp(-0.5)),
                 1 / (1 + std::exp(-3))},
                1e-12);
  expect_values(softplus(from_vector<double>({-50, 0, 50}, {3})),
                {std::log1p(std::exp(-50)), std::log(2), 50}, 1e-12);
  const Tensor p = from_vector<float>({1, 4, 9}, {3});
  expect_values(sqrt(p), {1, 2, 3});
  expect_values(log(p), {0, std::log(4), std::log(9)}, 1e-6);
  expect_values(pow(p, 0.5), {1, 2, 3}, 1e-6);
  expect_values(1.0 / p, {1, 0.25, 1.0 / 9}, 1e-7);
  expect_values(neg(from_vector<int32_t>({1, -2}, {2})), {-1, 2});
}

TEST(Elementwise, BroadcastingBinary) {
  const Tensor a = arange(0, 6, 1, DType::Float64).reshape({2, 3});
  const Tensor row = from_vector<double>({10, 20, 30}, {3});
  const Tensor col = from_vector<double>({100, 200}, {2, 1});
  expect_values(a + row, {10, 21, 32, 13, 24, 35});
  expect_values(a + col, {100, 101, 102, 203, 204, 205});
  expect_values(col - row, {90, 80, 70, 190, 180, 170});
  expect_values(row / col, {0.1, 0.2, 0.3, 0.05, 0.1, 0.15}, 1e-12);
  expect_values(a * full({}, 2.0, DType::Float64), {0, 2, 4, 6, 8, 10});
  expect_values(maximum(a, full({}, 2.5, DType::Float64)), {2.5, 2.5, 2.5, 3, 4, 5});
  expect_values(minimum(a, row), {0, 1, 2, 3, 4, 5});
  // Strided (transposed) operands go through the general loop.
  const Tensor t = a.transpose(0, 1);  // (3, 2)
  expect_values(t + from_vector<double>({1, 2}, {2}), {1, 5, 2, 6, 3, 7});
  expect_values(t * t, {0, 9, 1, 16, 4, 25});
  EXPECT_EQ((zeros({4, 1, 3}) + zeros({2, 1})).shape(), (Shape{4, 2, 3}));
  expect_values(from_vector<int64_t>({5, 7}, {2}) + from_vector<int64_t>({1}, {1}), {6, 8});
}

TEST(Elementwise, ComparisonsAreMasks) {
  const Tensor a = from_vector<float>({1, 2, 3}, {3}), b = from_vector<float>({2, 2, 2}, {3});
  expect_values(eq(a, b), {0, 1, 0});
  expect_values(ne(a, b), {1, 0, 1});
  expect_values(gt(a, b), {0, 0, 1});
  expect_values(ge(a, b), {0, 1, 1});
  expect_values(lt(a, b), {1, 0, 0});
  expect_values(le(a, b), {1, 1, 0});
  EXPECT_EQ(gt(a, b).dtype(), DType::Float32);
  expect_values(a * (a > b), {0, 0, 3});
}

TEST(Reduce, SumMeanMaxOverAxes) {
  const Tensor x = arange(0, 24, 1, DType::Float64).reshape({2, 3, 4});
  EXPECT_DOUBLE_EQ(sum(x).item(), 276);
  EXPECT_DOUBLE_EQ(mean(x).item(), 11.5);
  expect_values(sum(x, {2}), {6, 22, 38, 54, 70, 86});
  expect_values(sum(x, {0, 2}), {60, 92, 124});
  expect_values(mean(x, {1}), {4, 5, 6, 7, 16, 17, 18, 19});
  EXPECT_EQ(sum(x, {1}, true).shape(), (Shape{2, 1, 4}));
  EXPECT_EQ(sum(x, {-1}).shape(), (Shape{2, 3}));
  expect_values(max(x, {1}), {8, 9, 10, 11, 20, 21, 22, 23});
  expect_values(max(neg(x), {0, 2}), {0, -4, -8});
  // Reductions of strided views.
  expect_values(sum(x.transpose(0, 2), {2}), {12, 20, 28, 14, 22, 30, 16, 24, 32, 18, 26, 34});
  expect_values(sum(from_vector<int32_t>({1, 2, 3}, {3})), {6});
  // float32 sums of long rows accumulate in double.
  const Tensor ones_big = ones({1 << 20});
  EXPECT_DOUBLE_EQ(sum(ones_big * 0.1).item(), static_cast<double>(0.1f) * (1 << 20));
}

// A contiguous row of 64 or more is summed in 16 partial sums, a shorter one in one: every
// length around the boundaries (the switch, the tail, rows of several) gives the exact sum of
// values whose sums are exact, and long rows of random values match a long double reference in both
// dtypes; inf and NaN reach the result.
TEST(Reduce, SumOfContiguousRowsInPartialSums) {
  for (int64_t n : {0, 1, 15, 16, 17, 31, 32, 33, 63, 64, 65, 79, 80, 81, 4097, 100003}) {
    for (DType dt : {DType::Float32, DType::Float64}) {
      const Tensor x = arange(0, 2 * n, 1, dt).reshape({2, n}) * 0.5;  // rows of k/2: exact sums
      const double first = 0.5 * static_cast<double>(n) * static_cast<double>(n - 1) / 2;
      const double second = first + 0.5 * static_cast<double>(n) * static_cast<double>(n);
      const auto rows = sum(x, {1}).to_vector<double>();
      EXPECT_EQ(rows[0],
                dt == DType::Float32 ? static_cast<double>(static_cast<float>(first)) : first)
          << n;
      EXPECT_EQ(rows[1],
                dt == DType::Float32 ? static_cast<double>(static_cast<float>(second)) : second)
          << n;
    }
  }
  for (DType dt : {DType::Float32, DType::Float64}) {
    const Tensor x = dt == DType::Float32 ? test::rand32({3, 12345}) : test::rand64({3, 12345});
    const auto v = x.to_vector<double>();
    const auto rows = sum(x, {1}).to_vector<double>();
    for (int r = 0; r < 3; ++r) {
      long double ref = 0;
      for (int i = 0; i < 12345; ++i) ref += v[r * 12345 + i];
      EXPECT_NEAR(rows[r], static_cast<double>(ref), dt == DType::Float32 ? 1e-3 : 1e-9) << r;
    }
  }
  for (int64_t n : {40, 100}) {  // one accumulator, partial sums
    std::vector<double> special(n, 1.0);
    special[37] = INFINITY;
    EXPECT_EQ(sum(from_vector<double>(special, {n})).item(), INFINITY) << n;
    special[5] = NAN;
    EXPECT_TRUE(std::isnan(sum(from_vector<double>(special, {n})).item())) << n;
  }
}

// Reducing a block of axes with kept axes after it goes column by column (in registers for
// narrow rows): the same values, bit for bit, as the general sweep over a strided view of the
// same tensor, in every dtype, for widths around the blocks and empty reductions.
TEST(Reduce, ColumnsMatchTheGeneralSweepBitwise) {
  for (DType dt : {DType::Float32, DType::Float64, DType::Int32}) {
    for (int64_t inner : {2, 15, 16, 17, 33, 64, 65, 100}) {
      for (int64_t red : {0, 1, 3, 50}) {
        for (int64_t outer : {1, 3}) {
          const Tensor base = (test::rand64({inner, red, outer}) * 100.0).to(dt);
          const Tensor strided = base.permute({2, 1, 0});  // (outer, red, inner), not contiguous
          const Tensor dense = strided.contiguous();
          if (strided.is_contiguous()) {  // an empty reduction, or size-1 axes: nothing to compare
                                          // with
            if (red == 0) {
              EXPECT_EQ(max(abs(sum(dense, {1}).to(DType::Float64))).item(), 0.0);
            }
            continue;
          }
          for (bool use_max : {false, true}) {
            if (use_max && red == 0) continue;
            const Tensor a = use_max ? max(strided, {1}) : sum(strided, {1});
            const Tensor b = use_max ? max(dense, {1}) : sum(dense, {1});
            EXPECT_TRUE(test::bitwise_equal(a, b))
                << name(dt) << " outer " << outer << " red " << red << " inner " << inner
                << (use_max ? " max" : " sum");
          }
        }
      }
    }
  }
}

TEST(Reduce, MaxPropagatesNanAndStartsFromMinusInfinity) {
  const float inf = INFINITY;
  const Tensor x = from_vector<float>({1, NAN, 3, -inf, -inf, -inf}, {2, 3});
  const auto rows = max(x, {1}).to_vector<double>();
  EXPECT_TRUE(std::isnan(rows[0]));
  EXPECT_EQ(rows[1], -inf);
  EXPECT_TRUE(std::isnan(max(x).item()));
  expect_values(max(from_vector<int32_t>({-5, -7}, {2})), {-5});
}

TEST(Reduce, SumToInvertsBroadcast) {
  const Tensor g = ones({2, 3, 4});
  expect_values(sum_to(g, {3, 1}), {8, 8, 8});
  expect_values(sum_to(g, {4}), {6, 6, 6, 6});
  EXPECT_EQ(sum_to(g, {2, 3, 4}).shape(), (Shape{2, 3, 4}));
}

Tensor naive_matmul(const Tensor& a, const Tensor& b) {  // (M, K) @ (K, N) in float64
  const auto x = a.to_vector<double>(), y = b.to_vector<double>();
  const int64_t m = a.shape()[0], k = a.shape()[1], n = b.shape()[1];
  std::vector<double> out(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p) out[i * n + j] += x[i * k + p] * y[p * n + j];
  return from_vector(out, {m, n});
}

TEST(Matmul, MatchesNaiveIncludingViewsAndBatches) {
  const Tensor a = rand32({5, 7}, 1), b = rand32({7, 3}, 2);
  EXPECT_LT(max_abs_diff(matmul(a, b), naive_matmul(a, b)), 1e-5);
  // Transposed operands are passed to BLAS without a copy.
  const Tensor at = rand32({7, 5}, 3).transpose(0, 1), bt = rand32({3, 7}, 4).transpose(0, 1);
  EXPECT_LT(max_abs_diff(matmul(at, bt), naive_matmul(at.contiguous(), bt.contiguous())), 1e-5);
  // Batched with broadcasting: (2, 1, 5, 7) @ (3, 7, 3) -> (2, 3, 5, 3).
  const Tensor ba = rand64({2, 1, 5, 7}, 5), bb = rand64({3, 7, 3}, 6);
  const Tensor out = matmul(ba, bb);
  ASSERT_EQ(out.shape(), (Shape{2, 3, 5, 3}));
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      const Tensor ref = naive_matmul(ba.slice(0, i, i + 1).reshape({5, 7}),
                                      bb.slice(0, j, j + 1).reshape({7, 3}));
      EXPECT_LT(max_abs_diff(out.slice(0, i, i + 1).slice(1, j, j + 1).reshape({5, 3}), ref),
                1e-12);
    }
  // Dense-style (B, T, K) @ (K, N) folds into one GEMM; 1-D operands follow NumPy.
  const Tensor x3 = rand64({4, 6, 7}, 7);
  EXPECT_LT(max_abs_diff(matmul(x3, b.to(DType::Float64)).reshape({24, 3}),
                         naive_matmul(x3.reshape({24, 7}), b.to(DType::Float64))),
            1e-12);
  const Tensor v = from_vector<double>({1, 2}, {2});
  const Tensor m = from_vector<double>({1, 2, 3, 4}, {2, 2});
  expect_values(matmul(v, m), {7, 10});
  expect_values(matmul(m, v), {5, 11});
  EXPECT_EQ(matmul(v, v).shape(), Shape{});
  expect_values(matmul(zeros({2, 0}), zeros({0, 3})), {0, 0, 0, 0, 0, 0});
}

struct ConvCase {
  int64_t n, length, channels, filters, kernel, stride, dilation;
  Padding padding;
};
// gtest would print the bytes, padding included, which valgrind reports as uninitialized.
void PrintTo(const ConvCase& c, std::ostream* os) {
  *os << "(n " << c.n << ", length " << c.length << ", channels " << c.channels << ", filters "
      << c.filters << ", kernel " << c.kernel << ", stride " << c.stride << ", dilation "
      << c.dilation << ", padding " << c.padding.kind << " " << c.padding.left << " "
      << c.padding.right << ")";
}

class Conv1dMatchesReference : public ::testing::TestWithParam<ConvCase> {};

TEST_P(Conv1dMatchesReference, ForwardAndGradients) {
  const ConvCase c = GetParam();
  const Tensor x = rand32({c.n, c.length, c.channels}, 11),
               w = rand32({c.kernel, c.channels, c.filters}, 12);
  const Tensor y = conv1d(x, w, c.stride, c.padding, c.dilation);  // oneDNN, float32
  const Tensor y64 =
      conv1d(x.to(DType::Float64), w.to(DType::Float64), c.stride, c.padding, c.dilation);
  EXPECT_LT(max_abs_diff(y, y64), 1e-4);
  // Independent check of the float64 loops at one output position.
  const auto [pl, pr] =
      window_padding("conv1d", c.length, c.kernel, c.stride, c.dilation, c.padding);
  EXPECT_EQ(y.shape()[1], (c.length + pl + pr - c.dilation * (c.kernel - 1) - 1) / c.stride + 1);
  const auto xv = x.to_vector<double>(), wv = w.to_vector<double>(), yv = y64.to_vector<double>();
  const int64_t t = y.shape()[1] - 1, f = c.filters - 1, b = c.n - 1;
  double ref = 0;
  for (int64_t k = 0; k < c.kernel; ++k) {
    const int64_t i = t * c.stride + k * c.dilation - pl;
    if (i < 0 || i >= c.length) continue;
    for (int64_t ch = 0; ch < c.channels; ++ch)
      ref += xv[(b * c.length + i) * c.channels + ch] * wv[(k * c.channels + ch) * c.filters + f];
  }
  EXPECT_NEAR(yv[(b * y.shape()[1] + t) * c.filters + f], ref, 1e-12);
  // Gradients: oneDNN float32 against the float64 loops.
  Tensor xg = x.detach().set_requires_grad(), wg = w.detach().set_requires_grad();
  Tensor x64 = x.to(DType::Float64).set_requires_grad(),
         w64 = w.to(DType::Float64).set_requires_grad();
  const Tensor gy = rand32(y.shape(), 13);
  conv1d(xg, wg, c.stride, c.padding, c.dilation).backward(gy);
  conv1d(x64, w64, c.stride, c.padding, c.dilation).backward(gy.to(DType::Float64));
  EXPECT_LT(max_abs_diff(xg.grad(), x64.grad()), 1e-4);
  EXPECT_LT(max_abs_diff(wg.grad(), w64.grad()), 1e-3);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, Conv1dMatchesReference,
    ::testing::Values(ConvCase{2, 16, 3, 4, 3, 1, 1, Padding::valid()},
                      ConvCase{2, 17, 5, 6, 4, 2, 1, Padding::same()},
                      ConvCase{3, 140, 30, 16, 40, 4, 1, Padding::same()},
                      ConvCase{2, 20, 4, 3, 3, 1, 2, Padding::same()},
                      ConvCase{1, 12, 2, 2, 5, 3, 1, Padding::explicit_(1, 3)},
                      ConvCase{2, 9, 3, 2, 2, 1, 3, Padding::valid()},
                      // Shapes where oneDNN packs the weights into its blocked layouts (filters
                      // and channels not multiples of the block: padded blocks).
                      ConvCase{2, 40, 24, 20, 5, 1, 1, Padding::same()},
                      ConvCase{2, 60, 32, 48, 12, 1, 1, Padding::same()},
                      ConvCase{2, 50, 64, 64, 3, 2, 1, Padding::valid()},
                      ConvCase{2, 64, 16, 40, 20, 4, 2, Padding::same()}));

TEST(Conv1d, SamePaddingMatchesKeras) {
  // Keras 'same': output ceil(L / stride); left pad = total // 2.
  EXPECT_EQ(window_padding("conv1d", 140, 40, 4, 1, Padding::same()),
            (std::pair<int64_t, int64_t>{18, 18}));
  EXPECT_EQ(window_padding("conv1d", 141, 40, 4, 1, Padding::same()),
            (std::pair<int64_t, int64_t>{19, 20}));
  EXPECT_EQ(window_padding("conv1d", 10, 3, 1, 1, Padding::same()),
            (std::pair<int64_t, int64_t>{1, 1}));
  EXPECT_EQ(window_padding("conv1d", 10, 4, 1, 1, Padding::same()),
            (std::pair<int64_t, int64_t>{1, 2}));
  EXPECT_EQ(conv1d(zeros({1, 140, 30}), zeros({40, 30, 8}), 4, Padding::same()).shape(),
            (Shape{1, 35, 8}));
}

TEST(Conv1d, PrimitivesAreCachedPerShape) {
  const Tensor w = rand32({3, 2, 2}, 1);
  const int64_t before = Ledger::global().get(Counter::Autotunes);
  conv1d(rand32({1, 31, 2}, 2), w);
  const int64_t after_first = Ledger::global().get(Counter::Autotunes);
  EXPECT_EQ(after_first, before + 1);
  const int64_t hits = Ledger::global().get(Counter::AutotuneHits);
  conv1d(rand32({1, 31, 2}, 3), w);
  EXPECT_EQ(Ledger::global().get(Counter::Autotunes), after_first);
  EXPECT_EQ(Ledger::global().get(Counter::AutotuneHits), hits + 1);
  conv1d(rand32({1, 32, 2}, 4), w);  // a new length is a new primitive
  EXPECT_EQ(Ledger::global().get(Counter::Autotunes), after_first + 1);
  bool listed = false;
  for (const auto& p : conv1d_primitives()) listed |= p.key.find("L=31") != std::string::npos;
  EXPECT_TRUE(listed);
}

// oneDNN chooses the weights' layout per shape, and with it the implementation: on x86 with
// AVX2 or later a channels-heavy forward convolution runs a direct or brgemm kernel on weights
// packed into its blocked layout, not the GEMM-based one plain (K, C, F) weights allow.
TEST(Conv1d, ImplementationChosenPerShapeWithItsWeightLayout) {
  clear_conv1d_primitives();
  Tensor x = rand32({4, 48, 64}, 2).set_requires_grad(),
         w = rand32({12, 64, 64}, 1).set_requires_grad();
  sum(conv1d(x, w, 1, Padding::same())).backward();
  std::string forward;
  for (const auto& p : conv1d_primitives())
    if (p.key.rfind("forward N=4 L=48", 0) == 0) forward = p.impl;
  EXPECT_NE(forward.find("(weights in its layout)"), std::string::npos) << forward;
  EXPECT_EQ(forward.find("gemm"), std::string::npos) << forward;
  EXPECT_EQ(conv1d_primitives().size(), 3u);  // forward, backward data, backward filter
}

// conv1d_fused is activation(conv1d(x, w) + b): oneDNN's bias and post-ops on float32, the
// reference loops on float64, for every Keras activation.
TEST(Conv1d, FusedIsBiasThenActivation) {
  const Tensor x = rand32({3, 40, 24}, 1), w = rand32({5, 24, 20}, 2), b = rand32({20}, 3);
  for (Activation a : {Activation::Linear, Activation::Relu, Activation::Tanh, Activation::Sigmoid,
                       Activation::HardSigmoid}) {
    const Tensor unfused = activation(conv1d(x, w, 2, Padding::same()) + b, a);
    EXPECT_LT(max_abs_diff(conv1d_fused(x, w, b, 2, Padding::same(), 1, a), unfused), 1e-5)
        << name(a);
    const Tensor unfused64 =
        activation(conv1d(x.to(DType::Float64), w.to(DType::Float64), 2, Padding::same()) +
                       b.to(DType::Float64),
                   a);
    EXPECT_LT(max_abs_diff(conv1d_fused(x.to(DType::Float64), w.to(DType::Float64),
                                        b.to(DType::Float64), 2, Padding::same(), 1, a),
                           unfused64),
              1e-12)
        << name(a);
  }
  // An empty channel axis still adds the bias.
  expect_values(conv1d_fused(zeros({1, 2, 0}), zeros({1, 0, 2}), from_vector<float>({1, -1}, {2}),
                             1, Padding::valid(), 1, Activation::Relu),
                {1, 0, 1, 0});
  EXPECT_THROW(conv1d_fused(x, w, zeros({3})), ShapeError);
}

// dense is activation(x @ w + b) for every fusable activation, float32 and float64, over
// leading dims and over more rows than one GEMM block (the epilogue runs per block).
TEST(Dense, FusedIsMatmulBiasThenActivation) {
  for (const Shape& xs : {Shape{3, 5, 24}, Shape{24}, Shape{2100, 24}}) {
    const Tensor x = rand32(xs, 1), w = rand32({24, 300}, 2), b = rand32({300}, 3);
    for (Activation a : {Activation::Linear, Activation::Relu, Activation::Tanh,
                         Activation::Sigmoid, Activation::HardSigmoid}) {
      EXPECT_LT(max_abs_diff(dense(x, w, b, a), activation(matmul(x, w) + b, a)), 1e-5)
          << name(a) << xs.str();
      const Tensor x64 = x.to(DType::Float64), w64 = w.to(DType::Float64),
                   b64 = b.to(DType::Float64);
      EXPECT_LT(max_abs_diff(dense(x64, w64, b64, a), activation(matmul(x64, w64) + b64, a)), 1e-12)
          << name(a);
    }
  }
  // No input features: the bias alone.
  expect_values(
      dense(zeros({2, 0}), zeros({0, 2}), from_vector<float>({1, -1}, {2}), Activation::Relu),
      {1, 0, 1, 0});
  const Tensor x = rand32({4, 6}, 1), w = rand32({6, 3}, 2);
  EXPECT_THROW(dense(x, w, zeros({4})), ShapeError);
  EXPECT_THROW(dense(x, rand32({5, 3}, 2), zeros({3})), ShapeError);
  EXPECT_THROW(dense(x, w, zeros({3}), Activation::Gelu), ValueError);
}

// The fused epilogues treat NaN, infinities, signed zeros and subnormals as the separate ops
// do. Bit for bit where encore's own pass applies the activation: every activation on the BLAS
// path and in float64; linear, relu and hard_sigmoid after oneDNN's primitives (its relu and
// clip post-ops gave 0 for a NaN, so they are not used). oneDNN's tanh and sigmoid post-ops
// keep NaN and infinities and differ by an ulp at most. K = 1 and unit weights keep the
// products exact, so only the epilogue decides the results.
void expect_same_specials(const Tensor& fused, const Tensor& separate, bool bitwise,
                          const std::string& what) {
  if (bitwise) {
    EXPECT_TRUE(test::bitwise_equal(fused, separate)) << what;
    return;
  }
  const std::vector<double> f = fused.to(DType::Float64).to_vector<double>(),
                            r = separate.to(DType::Float64).to_vector<double>();
  ASSERT_EQ(f.size(), r.size()) << what;
  for (size_t i = 0; i < f.size(); ++i) {
    ASSERT_EQ(std::isnan(f[i]), std::isnan(r[i]))
        << what << " at " << i << ": " << f[i] << " vs " << r[i];
    if (!std::isnan(r[i])) {
      ASSERT_NEAR(f[i], r[i], 1e-6 * std::max(1.0, std::fabs(r[i]))) << what << " at " << i;
    }
  }
}

const std::vector<double> kSpecialValues{NAN, INFINITY, -INFINITY, -0.0, 0.0, -1.0,
                                         1.0, 1e-40,    -3.0,      40.0, 2.5, -2.5};
const Activation kFusable[] = {Activation::Linear, Activation::Relu, Activation::Tanh,
                               Activation::Sigmoid, Activation::HardSigmoid};

bool onednn_post_op(Activation a) { return a == Activation::Tanh || a == Activation::Sigmoid; }

TEST(Dense, EpilogueTreatsSpecialValuesAsTheSeparateOps) {
  for (int64_t cols : {2, 1024}) {  // 12 x 2: the BLAS path; 1024 x 1024: oneDNN's matmul
    const int64_t rows = cols == 2 ? 12 : 1024;
    std::vector<double> xs(rows), bs(cols);
    for (int64_t i = 0; i < rows; ++i) xs[i] = kSpecialValues[i % kSpecialValues.size()];
    for (int64_t j = 0; j < cols; ++j) bs[j] = j % 2 ? -0.0 : 0.0;
    for (DType dt : {DType::Float32, DType::Float64}) {
      const Tensor x = from_vector<double>(xs, {rows, 1}).to(dt);
      const Tensor w = ones({1, cols}).to(dt), b = from_vector<double>(bs, {cols}).to(dt);
      for (Activation a : kFusable) {
        const bool onednn = cols > 2 && dt == DType::Float32;
        expect_same_specials(dense(x, w, b, a), activation(matmul(x, w) + b, a),
                             !onednn || !onednn_post_op(a),
                             detail::cat(name(a), " ", name(dt), " ", rows, "x", cols));
      }
    }
  }
}

// conv1d_fused in float32 always runs oneDNN's convolution; the blocked layout's output has
// padding lanes (20 filters in blocks of 16), which the relu / hard_sigmoid pass leaves alone.
TEST(Conv1dFused, EpilogueTreatsSpecialValuesAsTheSeparateOps) {
  std::vector<double> xs(2 * 24);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = kSpecialValues[i % kSpecialValues.size()];
  const Tensor x = from_vector<double>(xs, {2, 24, 1}).to(DType::Float32), w = ones({1, 1, 20});
  std::vector<double> bs(20);
  for (size_t j = 0; j < bs.size(); ++j) bs[j] = j % 2 ? -0.0 : 0.0;
  const Tensor b = from_vector<double>(bs, {20}).to(DType::Float32);
  const Conv1dLayout layout = conv1d_layout();
  for (Conv1dLayout l : {Conv1dLayout::Native, Conv1dLayout::Blocked}) {
    set_conv1d_layout(l);
    for (Activation a : kFusable) {
      const Tensor fused = conv1d_fused(x, w, b, 1, Padding::valid(), 1, a);
      const Tensor separate = activation(conv1d(x, w, 1, Padding::valid()) + b, a);
      expect_same_specials(
          fused, separate, !onednn_post_op(a),
          detail::cat(name(a), l == Conv1dLayout::Blocked ? " blocked" : " native"));
    }
  }
  set_conv1d_layout(layout);
}

// The sequence ops' float32 kernels run their per-step products through oneDNN on the packed
// recurrent kernel (the backward ops on its transpose); float64 runs the BLAS. Both directions,
// forward and backward, agree to float32 precision.
// activation_grad, the gradient before a fused activation, is the formula its backward
// formulas wrote with ops before (each op rounding in turn), value for value: special values
// in the gradient and in the output included (a mask of 0 still turns a NaN or infinite
// gradient into NaN, as the product did), in float32 and float64, broadcast gradients too.
TEST(ActivationGrad, IsTheFormulaWrittenWithOpsValueForValue) {
  const std::vector<double>& v = kSpecialValues;
  std::vector<double> gs, ys;  // every pair of special values
  for (double g : v)
    for (double y : v) gs.push_back(g), ys.push_back(y);
  for (DType dt : {DType::Float32, DType::Float64}) {
    const int64_t n = static_cast<int64_t>(gs.size());
    const Tensor gy = from_vector<double>(gs, {n}).to(dt), y = from_vector<double>(ys, {n}).to(dt);
    const std::pair<Activation, Tensor> composed[] = {
        {Activation::Relu, gy * gt(y, 0.0)},
        {Activation::Tanh, gy * (1.0 - y * y)},
        {Activation::Sigmoid, gy * (y * (1.0 - y))},
        {Activation::HardSigmoid, gy * (gt(y, 0.0) * lt(y, 1.0) * 0.2)},
        {Activation::Linear, gy},
    };
    for (const auto& [a, expected] : composed) {
      const std::vector<double> got =
          activation_backward(a, gy, y).to(DType::Float64).to_vector<double>();
      const std::vector<double> want = expected.to(DType::Float64).to_vector<double>();
      for (int64_t i = 0; i < n; ++i) {
        const bool same = std::isnan(want[i]) ? std::isnan(got[i])
                                              : std::memcmp(&got[i], &want[i], sizeof(double)) == 0;
        EXPECT_TRUE(same) << name(a) << " " << name(dt) << ": gy " << gs[i] << ", y " << ys[i]
                          << " gave " << got[i] << ", the ops " << want[i];
      }
    }
    // A gradient broadcast along the middle axis, as a mean's backward hands it on.
    const Tensor g3 = rand32({4, 1, 33}, 5).to(dt).expand({4, 3, 33}),
                 y3 = rand32({4, 3, 33}, 6).to(dt);
    EXPECT_TRUE(
        test::bitwise_equal(activation_backward(Activation::Tanh, g3, y3), g3 * (1.0 - y3 * y3)));
  }
}

TEST(ActivationGrad, RefusesActivationsWhoseGradientIsNotAFunctionOfTheOutput) {
  const Tensor g = rand32({3}), y = rand32({3}, 2);
  for (Activation a : {Activation::Gelu, Activation::Softmax}) {
    try {
      activation_backward(a, g, y);
      ADD_FAILURE() << name(a) << " was accepted";
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("[activation_grad]"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(std::string(name(a))), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(activation_backward(Activation::Relu, from_vector<int32_t>({1}, {1}),
                                   from_vector<int32_t>({1}, {1})),
               DTypeError);
  EXPECT_THROW(activation_backward(Activation::Relu, rand32({3}), rand32({4})), ShapeError);
  EXPECT_THROW(activation_backward(Activation::Tanh, rand32({3}), rand64({3})), DTypeError);
  EXPECT_EQ(activation_backward(Activation::Sigmoid, zeros({0, 4}), zeros({0, 4})).shape(),
            (Shape{0, 4}));
}

// softplus(z) - z y against the float64 reference, with no overflow or cancellation at large
// |z|, and NaN kept.
TEST(BinaryCrossentropyLogits, IsStableAndKeepsNan) {
  const std::vector<double> zs = {-100, -20, -1, 0, 0.3, 20, 100, NAN}, ys = {0, 0.5, 1};
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (double y : ys) {
      const Tensor z = from_vector<double>(zs, {8}).to(dt);
      const std::vector<double> got =
          binary_crossentropy_logits(z, full({}, y, dt)).to(DType::Float64).to_vector<double>();
      for (size_t i = 0; i < zs.size(); ++i) {
        if (std::isnan(zs[i])) {
          EXPECT_TRUE(std::isnan(got[i]));
          continue;
        }
        const double ref =
            std::max(zs[i], 0.0) + std::log1p(std::exp(-std::fabs(zs[i]))) - zs[i] * y;
        EXPECT_NEAR(got[i], ref,
                    (dt == DType::Float32 ? 1e-6 : 1e-14) * std::max(1.0, std::fabs(ref)))
            << "z " << zs[i] << ", y " << y << " " << name(dt);
      }
    }
  }
  EXPECT_THROW(
      binary_crossentropy_logits(from_vector<int32_t>({1}, {1}), from_vector<int32_t>({1}, {1})),
      DTypeError);
  EXPECT_THROW(binary_crossentropy_logits(rand32({3}), rand32({4})), ShapeError);
  EXPECT_THROW(binary_crossentropy_logits(rand32({3}), rand64({3})), DTypeError);
  // Empty: an empty result, and an empty gradient through it.
  const Tensor z = zeros({0, 3}).set_requires_grad();
  const Tensor loss = binary_crossentropy_logits(z, zeros({0, 3}));
  EXPECT_EQ(loss.shape(), (Shape{0, 3}));
  sum(loss).backward();
  EXPECT_EQ(z.grad().shape(), (Shape{0, 3}));
}

// The dispatcher's per-shape cache counts what it searched or created: a small Dense runs on
// the BLAS path with no state, which is neither an autotune nor a hit; a large one creates
// oneDNN's matmul once, then reuses it.
TEST(Dispatch, AutotuneCountersCountOnlyPreparedStates) {
  Ledger& ledger = Ledger::global();
  const auto counts = [&] {
    return std::pair{ledger.get(Counter::Autotunes), ledger.get(Counter::AutotuneHits)};
  };
  const Tensor xs = rand32({5, 7}), ws = rand32({7, 3}, 2), bs = rand32({3}, 3);
  auto before = counts();
  for (int i = 0; i < 3; ++i) (void)dense(xs, ws, bs, Activation::Relu);
  EXPECT_EQ(counts(), before);
  const Tensor xl = rand32({64, 128}), wl = rand32({128, 128}, 2),
               bl = rand32({128}, 3);  // 2^20 multiply-adds
  before = counts();
  for (int i = 0; i < 3; ++i) (void)dense(xl, wl, bl, Activation::Relu);
  EXPECT_EQ(counts(), std::pair(before.first + 1, before.second + 2));
}

TEST(Recurrent, Float32StepProductsMatchFloat64) {
  const int64_t batch = 3, steps = 9, units = 24;
  for (bool reverse : {false, true}) {
    for (bool gru : {false, true}) {
      const int64_t gates = gru ? 3 : 4;
      const Tensor xw = rand32({batch, steps, gates * units}, 1),
                   r = rand32({units, gates * units}, 2) * 0.3, b = rand32({gates * units}, 3),
                   gy = rand32({batch, steps, units}, 4);
      std::vector<std::vector<Tensor>> grads;
      std::vector<Tensor> ys;
      for (DType d : {DType::Float32, DType::Float64}) {
        std::vector<Tensor> in{xw.to(d).detach(), r.to(d).detach(), b.to(d).detach()};
        for (Tensor& t : in) t.set_requires_grad(true);
        const Tensor y =
            gru ? gru_sequence(in[0], in[1], in[2], Activation::Tanh, Activation::Sigmoid, reverse)
                : lstm_sequence(in[0], in[1], Activation::Tanh, Activation::Sigmoid, reverse);
        sum(y * gy.to(d)).backward();
        ys.push_back(y);
        grads.push_back({in[0].grad(), in[1].grad()});
      }
      const std::string what = std::string(gru ? "gru" : "lstm") + (reverse ? " reverse" : "");
      EXPECT_LT(max_abs_diff(ys[0], ys[1]), 1e-5) << what;
      EXPECT_LT(max_abs_diff(grads[0][0], grads[1][0]), 1e-5) << what << " d xw";
      EXPECT_LT(max_abs_diff(grads[0][1], grads[1][1]), 1e-4) << what << " d recurrent_kernel";
    }
  }
}

TEST(Softmax, RowsSumToOneAndMatchLogSoftmax) {
  const Tensor x = rand64({3, 5}) * 10.0;
  const Tensor s = softmax(x, -1);
  expect_values(sum(s, {1}), {1, 1, 1}, 1e-12);
  EXPECT_LT(max_abs_diff(log(s), log_softmax(x, -1)), 1e-12);
  // Large logits do not overflow.
  expect_values(softmax(from_vector<float>({1000, 1000}, {2}), 0), {0.5, 0.5});
  // Along a middle axis.
  const Tensor y = softmax(rand64({2, 4, 3}), 1);
  expect_values(sum(y, {1}), {1, 1, 1, 1, 1, 1}, 1e-12);
}

// float32 log_softmax against float64 of the same inputs, relative to each value: neither the
// log of the sum (at the scale of the largest logit) nor the sum (at the scale of 1) may be
// rounded away when one entry dominates.
TEST(Softmax, LogSoftmaxIsPreciseWhenOneEntryDominates) {
  const Tensor x = from_vector<float>({200, 190, 180, 1e-3f, 0, -1e-3f, -50, 30, 30.5f}, {3, 3});
  for (int64_t axis : {-1, 0}) {
    const auto got = log_softmax(x, axis).to_vector<double>();
    const auto ref = log_softmax(x.to(DType::Float64), axis).to_vector<double>();
    for (size_t i = 0; i < ref.size(); ++i)
      EXPECT_NEAR(got[i], ref[i], 1e-6 * std::fabs(ref[i]) + 1e-30)
          << "axis " << axis << ", element " << i;
  }
  EXPECT_NEAR(log_softmax(x).to_vector<float>()[0], -4.5400960e-5, 1e-11);  // -log1p(e^-10 + e^-20)
  // Ties with the maximum each count once; NaN propagates.
  expect_values(log_softmax(from_vector<float>({3, 3, 3, 3}, {4})),
                std::vector<double>(4, -std::log(4.0)), 1e-7);
  EXPECT_TRUE(std::isnan(log_softmax(from_vector<float>({1, NAN, 2}, {3})).to_vector<float>()[0]));
}

TEST(Dropout, ScalesKeptValuesAndIsDeterministicPerSeed) {
  const Tensor x = ones({10000});
  Generator g1(3), g2(3);
  const Tensor a = dropout(x, 0.25, true, &g1), b = dropout(x, 0.25, true, &g2);
  EXPECT_TRUE(test::bitwise_equal(a, b));
  const auto v = a.to_vector<float>();
  int kept = 0;
  for (float f : v) {
    EXPECT_TRUE(f == 0.0f || std::fabs(f - 1.0f / 0.75f) < 1e-6);
    kept += f != 0.0f;
  }
  EXPECT_NEAR(kept / 10000.0, 0.75, 0.02);
  EXPECT_FALSE(test::bitwise_equal(a, dropout(x, 0.25, true, &g1)));  // the stream advanced
  EXPECT_TRUE(dropout(x, 0.25, false, &g1).same(x));                  // identity in inference
}

TEST(GatherScatter, PickAndScatterAlongLastAxis) {
  const Tensor x = arange(0, 12, 1, DType::Float64).reshape({3, 4});
  const Tensor idx = from_vector<int32_t>({3, 0, 2}, {3});
  expect_values(gather_last(x, idx), {3, 4, 10});
  expect_values(scatter_last(from_vector<double>({1, 2, 3}, {3}), idx, 4),
                {0, 0, 0, 1, 2, 0, 0, 0, 0, 0, 3, 0});
  EXPECT_THROW(gather_last(x, from_vector<int32_t>({4, 0, 0}, {3})), ValueError);
}

TEST(LstmCell, MatchesTheGateEquations) {
  const Tensor z = rand64({2, 8}, 1), c = rand64({2, 2}, 2);
  const auto [h, c1] = lstm_cell(z, c, Activation::Tanh, Activation::Sigmoid);
  const Tensor i = sigmoid(z.slice(1, 0, 2)), f = sigmoid(z.slice(1, 2, 4)),
               g = tanh(z.slice(1, 4, 6)), o = sigmoid(z.slice(1, 6, 8));
  const Tensor c_ref = f * c + i * g;
  EXPECT_LT(max_abs_diff(c1, c_ref), 1e-12);
  EXPECT_LT(max_abs_diff(h, o * tanh(c_ref)), 1e-12);
}

TEST(DataMovement, ConcatStackFlip) {
  const Tensor a = arange(0, 4).reshape({2, 2}), b = arange(4, 6).reshape({2, 1});
  expect_values(concat({a, b}, 1), {0, 1, 4, 2, 3, 5});
  expect_values(concat({a, a}, 0), {0, 1, 2, 3, 0, 1, 2, 3});
  EXPECT_EQ(stack({a, a, a}, 1).shape(), (Shape{2, 3, 2}));
  expect_values(stack({a, a + 10.0}, 0).slice(0, 1, 2).reshape({4}), {10, 11, 12, 13});
  expect_values(flip(arange(0, 6).reshape({2, 3}), 1), {2, 1, 0, 5, 4, 3});
  expect_values(flip(arange(0, 6).reshape({2, 3}), 0), {3, 4, 5, 0, 1, 2});
}

}  // namespace
}  // namespace encore
