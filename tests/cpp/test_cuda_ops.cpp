// Parity of every op's CUDA kernel with the CPU: random inputs, the CPU in float64 as the
// reference, the GPU in float32 (and in float64 where its kernel takes it), forward and
// backward (through autograd), with broadcasting and strided inputs. Skipped without a GPU.
#include <functional>
#include <limits>

#include "core/ledger.h"
#include "core/modes.h"
#include "helpers.h"
#include "nn/lstm.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/nn.h"

namespace encore {
namespace {

using test::rand64;

using test::expect_close;
using test::kGpu;

using Fn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

Fn two(Tensor (*f)(const Tensor&, const Tensor&)) {
  return [f](const std::vector<Tensor>& x) { return std::vector<Tensor>{f(x[0], x[1])}; };
}

struct Run {
  std::vector<Tensor> outputs, grads;
};

// Runs `fn` on copies of `inputs` (floating ones converted to `dtype`) on `device`; with
// `grads`, also the gradients of sum_k <out_k, r_k> for fixed random r_k.
Run run(const Fn& fn, const std::vector<Tensor>& inputs, Device device, DType dtype, bool grads) {
  std::vector<Tensor> in;
  for (const Tensor& x : inputs) {
    Tensor t = is_floating(x.dtype()) ? x.to(dtype).to(device) : x.to(device);
    if (t.same(x)) t = t.clone();
    if (grads && is_floating(t.dtype())) t.set_requires_grad();
    in.push_back(t);
  }
  Run r;
  r.outputs = fn(in);
  if (!grads) return r;
  Tensor loss;
  for (size_t k = 0; k < r.outputs.size(); ++k) {
    const Tensor& y = r.outputs[k];
    if (!is_floating(y.dtype()) || !y.requires_grad()) continue;
    const Tensor term = sum(y * rand64(y.shape(), 100 + k).to(y.dtype()).to(device));
    loss = loss.defined() ? loss + term : term;
  }
  if (loss.defined()) loss.backward();
  for (const Tensor& t : in)
    if (is_floating(t.dtype())) r.grads.push_back(t.grad());
  return r;
}

struct Case {
  std::string name;
  Fn fn;
  std::vector<Tensor> inputs;
  double tol32 = 2e-5;  // float32 GPU vs float64 CPU
  bool grads = true;
  bool gpu64 = true;  // also run the GPU in float64
};

void expect_parity(const Case& c) {
  SCOPED_TRACE(c.name);
  const Run ref = run(c.fn, c.inputs, Device::cpu(), DType::Float64, c.grads);
  std::vector<std::pair<DType, double>> variants{{DType::Float32, c.tol32}};
  if (c.gpu64) variants.push_back({DType::Float64, 1e-9});
  for (auto [dtype, tol] : variants) {
    const Run got = run(c.fn, c.inputs, kGpu, dtype, c.grads);
    const std::string tag = c.name + " (" + std::string(name(dtype)) + ")";
    ASSERT_EQ(ref.outputs.size(), got.outputs.size());
    for (size_t k = 0; k < ref.outputs.size(); ++k) {
      EXPECT_TRUE(got.outputs[k].device() == kGpu) << tag;
      expect_close(ref.outputs[k], got.outputs[k], tol, tag + " output " + std::to_string(k));
    }
    ASSERT_EQ(ref.grads.size(), got.grads.size());
    for (size_t i = 0; i < ref.grads.size(); ++i) {
      if (!ref.grads[i].defined()) {
        EXPECT_FALSE(got.grads[i].defined()) << tag << " grad " << i;
        continue;
      }
      expect_close(ref.grads[i], got.grads[i], tol, tag + " grad of input " + std::to_string(i));
    }
  }
}

Tensor positive(const Shape& s, uint64_t seed) { return rand64(s, seed) * 0.4 + 1.0; }
Tensor away_from_zero(const Shape& s, uint64_t seed) {
  const Tensor r = rand64(s, seed);
  return r + (gt(r, 0.0) - lt(r, 0.0)) * 0.2;
}

TEST(CudaOps, Unary) {
  REQUIRE_CUDA();
  const Shape s{5, 7};
  // Each op also on a transposed view (strided kernel path).
  auto with_view = [](Tensor (*f)(const Tensor&)) {
    return Fn([f](const std::vector<Tensor>& x) {
      return std::vector<Tensor>{f(x[0]), f(x[0].transpose(0, 1))};
    });
  };
  const std::vector<Case> cases{
      {"neg", with_view(neg), {rand64(s, 1)}},
      {"exp", with_view(exp), {rand64(s, 2)}},
      {"log", with_view(log), {positive(s, 3)}},
      {"sqrt", with_view(sqrt), {positive(s, 4)}},
      {"tanh", with_view(tanh), {rand64(s, 5)}},
      {"sigmoid", with_view(sigmoid), {rand64(s, 6)}},
      {"relu", with_view(relu), {away_from_zero(s, 7)}},
      {"abs", with_view(abs), {away_from_zero(s, 8)}},
      {"softplus", with_view(softplus), {rand64(s, 9) * 5.0}},
      {"leaky_relu",
       [](auto& x) {
         return std::vector<Tensor>{leaky_relu(x[0], 0.1), leaky_relu(x[0].slice(1, 1, 7, 2), 0.1)};
       },
       {away_from_zero(s, 10)}},
      {"pow_scalar",
       [](auto& x) { return std::vector<Tensor>{pow(x[0], 2.5)}; },
       {positive(s, 11)}},
      {"add_scalar", [](auto& x) { return std::vector<Tensor>{x[0] + 1.5}; }, {rand64(s, 12)}},
      {"mul_scalar",
       [](auto& x) { return std::vector<Tensor>{x[0].transpose(0, 1) * -2.5}; },
       {rand64(s, 13)}},
      {"clip",
       [](auto& x) { return std::vector<Tensor>{clip(x[0], -0.5, 0.5)}; },
       {away_from_zero(s, 14) * 0.7}},
  };
  for (const Case& c : cases) expect_parity(c);
}

TEST(CudaOps, BinaryBroadcasting) {
  REQUIRE_CUDA();
  const Shape s{3, 4};
  const std::vector<Case> cases{
      {"add (3,4)+(4,)", two(add), {rand64(s, 1), rand64({4}, 2)}},
      {"sub (3,1)-(3,4)", two(sub), {rand64({3, 1}, 3), rand64(s, 4)}},
      {"mul (2,1,4)*(3,1)", two(mul), {rand64({2, 1, 4}, 5), rand64({3, 1}, 6)}},
      {"div by scalar tensor", two(div), {rand64(s, 7), positive({}, 8)}},
      {"div scalar by", two(div), {positive({1}, 9), positive(s, 10)}},
      {"maximum", two(maximum), {rand64(s, 11), rand64(s, 12)}},
      {"minimum (3,4),(4,)", two(minimum), {rand64(s, 13), rand64({4}, 14)}},
      {"add, transposed and sliced",
       [](auto& x) { return std::vector<Tensor>{x[0].transpose(0, 1) + x[1].slice(0, 0, 4, 1)}; },
       {rand64({3, 4}, 15), rand64({6, 3}, 16)}},
      {"mul, expanded",
       [](auto& x) {
         return std::vector<Tensor>{x[0].expand({5, 3, 4}) * x[1]};
       },
       {rand64({3, 1}, 17), rand64({5, 3, 4}, 18)}},
      {"large dense add (vector path)", two(add), {rand64({1000, 37}, 19), rand64({1000, 37}, 20)}},
  };
  for (const Case& c : cases) expect_parity(c);
}

TEST(CudaOps, ComparisonsAndIntegers) {
  REQUIRE_CUDA();
  // Values on a coarse grid, so that ties occur.
  const Tensor a = (rand64({4, 6}, 1) * 3.0).to(DType::Int32).to(DType::Float64);
  const Tensor b = (rand64({6}, 2) * 3.0).to(DType::Int32).to(DType::Float64);
  using Compare = Tensor (*)(const Tensor&, const Tensor&);
  for (Compare f : std::initializer_list<Compare>{eq, ne, gt, ge, lt, le})
    expect_parity(
        {"comparison",
         [f](auto& x) {
           return std::vector<Tensor>{f(x[0], x[1]), f(x[1], x[0].transpose(0, 1).slice(0, 0, 6))};
         },
         {a, b},
         0.0,
         false});
  for (DType dt : {DType::Int32, DType::Int64}) {
    const Tensor x = (rand64({5, 8}, 3) * 100.0).to(dt), y = (rand64({8}, 4) * 100.0).to(dt);
    const Tensor xg = x.to(kGpu), yg = y.to(kGpu);
    EXPECT_TRUE(test::bitwise_equal(x + y, xg + yg));
    EXPECT_TRUE(test::bitwise_equal(x * y, xg * yg));
    EXPECT_TRUE(test::bitwise_equal(maximum(x, y), maximum(xg, yg)));
    EXPECT_TRUE(test::bitwise_equal(neg(x.transpose(0, 1)), neg(xg.transpose(0, 1))));
    EXPECT_TRUE(test::bitwise_equal(abs(x) + 3.0, abs(xg) + 3.0));
    EXPECT_TRUE(test::bitwise_equal(sum(x, {1}), sum(xg, {1})));
    EXPECT_TRUE(test::bitwise_equal(max(x, {0}), max(xg, {0})));
    EXPECT_TRUE(test::bitwise_equal(x.to(DType::Float32), xg.to(DType::Float32)));
  }
}

TEST(CudaOps, Reductions) {
  REQUIRE_CUDA();
  const std::vector<Case> cases{
      {"sum suffix",
       [](auto& x) {
         return std::vector<Tensor>{sum(x[0], {2}), sum(x[0], {1, 2}, true)};
       },
       {rand64({3, 4, 5}, 1)}},
      {"sum prefix / middle / all",
       [](auto& x) {
         return std::vector<Tensor>{sum(x[0], {0}), sum(x[0], {1}, true), sum(x[0]),
                                    sum(x[0], {0, 2})};
       },
       {rand64({3, 4, 5}, 2)}},
      {"sum of views",
       [](auto& x) {
         return std::vector<Tensor>{sum(x[0].transpose(0, 2), {2}),
                                    sum(x[0].slice(1, 0, 4, 3), {1}), sum(x[0].permute({1, 0, 2}))};
       },
       {rand64({3, 4, 5}, 3)}},
      {"max",
       [](auto& x) {
         return std::vector<Tensor>{max(x[0], {2}), max(x[0], {0, 1}, true),
                                    max(x[0].transpose(0, 1), {1})};
       },
       {rand64({3, 4, 5}, 4)}},
      // CUB paths: one long dense reduction, and rows long enough for a block each.
      {"sum all, 300k",
       [](auto& x) {
         return std::vector<Tensor>{sum(x[0]), max(x[0])};
       },
       {rand64({300, 1000}, 5)},
       1e-4},
      {"sum rows of 5000",
       [](auto& x) {
         return std::vector<Tensor>{sum(x[0], {1}), max(x[0], {1}, true)};
       },
       {rand64({7, 5000}, 6)},
       1e-4},
      // Few outputs, long reduction over the leading axis: the split (two-pass) path.
      {"sum columns, 50k rows",
       [](auto& x) {
         return std::vector<Tensor>{sum(x[0], {0}), max(x[0], {0})};
       },
       {rand64({50000, 3}, 7)},
       1e-4},
      {"sum of a transposed 2-D, all",
       [](auto& x) { return std::vector<Tensor>{sum(x[0].transpose(0, 1))}; },
       {rand64({400, 300}, 8)},
       1e-4},
      {"mean", [](auto& x) { return std::vector<Tensor>{mean(x[0], {1})}; }, {rand64({6, 9}, 9)}},
  };
  for (const Case& c : cases) expect_parity(c);
  // Summing over an empty axis gives zeros.
  const Tensor e = sum(zeros({3, 0}, DType::Float32, kGpu), {1});
  test::expect_values(e, {0, 0, 0});
}

TEST(CudaOps, DataMovement) {
  REQUIRE_CUDA();
  const std::vector<Case> cases{
      {"copy of a transposed view",
       [](auto& x) {
         return std::vector<Tensor>{x[0].transpose(0, 1).clone(),
                                    x[0].permute({1, 0}).contiguous()};
       },
       {rand64({4, 6}, 1)}},
      {"concat with a strided input",
       [](auto& x) {
         return std::vector<Tensor>{concat({x[0], x[1].transpose(1, 2), x[0] * 2.0}, 1)};
       },
       {rand64({2, 3, 4}, 2), rand64({2, 4, 5}, 3)}},
      {"stack",
       [](auto& x) {
         return std::vector<Tensor>{stack({x[0], x[1]}, 0)};
       },
       {rand64({3, 2}, 4), rand64({3, 2}, 5)}},
      {"slice (backward: slice_grad)",
       [](auto& x) {
         return std::vector<Tensor>{x[0].slice(1, 1, 6, 2) * 3.0, x[0].slice(0, 2, 3)};
       },
       {rand64({4, 7}, 6)}},
      {"flip",
       [](auto& x) {
         return std::vector<Tensor>{flip(x[0], 1), flip(x[0].transpose(0, 2), 0)};
       },
       {rand64({2, 5, 3}, 7)}},
      {"cast round trip",
       [](auto& x) {
         return std::vector<Tensor>{x[0].to(DType::Float32).to(DType::Float64) * 1.0};
       },
       {rand64({5, 5}, 8)},
       1e-6},
  };
  for (const Case& c : cases) expect_parity(c);

  // Casts between every pair of dtypes agree bit for bit.
  const Tensor src = rand64({3, 5}, 9) * 50.0;
  for (DType from : {DType::Float32, DType::Float64, DType::Int32, DType::Int64})
    for (DType to : {DType::Float32, DType::Float64, DType::Int32, DType::Int64}) {
      const Tensor c = src.to(from);
      EXPECT_TRUE(test::bitwise_equal(c.transpose(0, 1).to(to), c.to(kGpu).transpose(0, 1).to(to)))
          << name(from) << " -> " << name(to);
    }
}

TEST(CudaOps, InPlace) {
  REQUIRE_CUDA();
  NoGradGuard no_grad;
  const Tensor base = rand64({4, 6}, 1).to(DType::Float32);
  Tensor c = base.clone(), g = base.to(kGpu);
  const Tensor row = rand64({6}, 2).to(DType::Float32);
  // Into strided views: every other column, a transposed block.
  c.slice(1, 0, 6, 2).fill_(3.5);
  g.slice(1, 0, 6, 2).fill_(3.5);
  c.transpose(0, 1).slice(0, 1, 3).copy_(rand64({2, 4}, 3));
  g.transpose(0, 1).slice(0, 1, 3).copy_(rand64({2, 4}, 3));
  for (Tensor* t : {&c, &g}) {
    const Tensor in[] = {*t, row.to(t->device())};
    dispatch(op("add_"), in);
    const Tensor view[] = {t->slice(0, 1, 3)};
    dispatch(op("add_scalar_"), view, ScalarAttrs{-1.25});
  }
  EXPECT_TRUE(test::bitwise_equal(c, g));
}

TEST(CudaOps, Transfers) {
  REQUIRE_CUDA();
  const Tensor x = rand64({5, 6, 7}, 1);
  for (const Tensor& v : {x, x.transpose(0, 2), x.slice(1, 1, 6, 2)}) {
    const Tensor g = v.to(kGpu);
    EXPECT_TRUE(g.device() == kGpu);
    EXPECT_TRUE(test::bitwise_equal(v, g));  // H2D, then D2H
    EXPECT_TRUE(test::bitwise_equal(
        v, g.transpose(0, 1).to(Device::cpu()).transpose(0, 1)));  // strided D2H
  }
  // Many small uploads in a row go through the pinned staging buffers.
  for (int i = 0; i < 100; ++i) {
    const Tensor s = full({3}, i, DType::Float32);
    ASSERT_EQ(s.to(kGpu).to_vector<float>()[2], static_cast<float>(i));
  }
}

TEST(CudaOps, Matmul) {
  REQUIRE_CUDA();
  const std::vector<Case> cases{
      {"2-D", two(matmul), {rand64({5, 7}, 1), rand64({7, 3}, 2)}},
      {"transposed operands",
       [](auto& x) {
         return std::vector<Tensor>{matmul(x[0].transpose(0, 1), x[1].transpose(0, 1))};
       },
       {rand64({7, 5}, 3), rand64({3, 7}, 4)}},
      {"(2,3,4,5) @ (5,6): rows folded", two(matmul), {rand64({2, 3, 4, 5}, 5), rand64({5, 6}, 6)}},
      {"batched (3,4,5) @ (3,5,6)", two(matmul), {rand64({3, 4, 5}, 7), rand64({3, 5, 6}, 8)}},
      {"broadcast batch (4,5) @ (2,5,6)", two(matmul), {rand64({4, 5}, 9), rand64({2, 5, 6}, 10)}},
      {"broadcast batch (2,1,4,5) @ (3,5,2)",
       two(matmul),
       {rand64({2, 1, 4, 5}, 11), rand64({3, 5, 2}, 12)}},
      {"batched, transposed batch",
       [](auto& x) { return std::vector<Tensor>{matmul(x[0].transpose(0, 1), x[1])}; },
       {rand64({4, 3, 5}, 13), rand64({3, 5, 2}, 14)}},
      {"vector @ matrix, matrix @ vector",
       [](auto& x) {
         return std::vector<Tensor>{matmul(x[1], x[0]), matmul(x[0], x[2])};
       },
       {rand64({5, 4}, 15), rand64({5}, 16), rand64({4}, 17)}},
      {"sliced rows",
       [](auto& x) { return std::vector<Tensor>{matmul(x[0].slice(1, 2, 3).squeeze(1), x[1])}; },
       {rand64({4, 6, 5}, 18), rand64({5, 3}, 19)}},
  };
  for (const Case& c : cases) expect_parity(c);
}

struct ConvSpec {
  int64_t n, length, channels, filters, kernel, stride, dilation;
  Padding padding;
};

TEST(CudaOps, Conv1d) {
  REQUIRE_CUDA();
  const std::vector<ConvSpec> specs{
      {2, 16, 3, 4, 3, 1, 1, Padding::valid()},
      {2, 17, 5, 6, 4, 1, 1, Padding::same()},  // even kernel: (1, 2), explicit padding
      {3, 140, 30, 16, 40, 4, 1, Padding::same()},
      {2, 141, 8, 5, 40, 4, 1, Padding::same()},  // (19, 20), explicit padding
      {2, 20, 4, 3, 3, 1, 2, Padding::same()},    // dilation 2
      {2, 21, 4, 3, 2, 1, 3, Padding::same()},    // dilation 3, asymmetric (1, 2)
      {2, 33, 3, 4, 5, 4, 2, Padding::same()},    // stride 4 and dilation 2: (4, 4)
      {2, 34, 3, 4, 5, 4, 2, Padding::same()},  // stride 4 and dilation 2: (3, 4), explicit padding
      {1, 12, 2, 2, 5, 3, 1, Padding::explicit_(1, 3)},  // symmetric 1 gives the same output
      {1, 12, 2, 2, 5, 3, 1, Padding::explicit_(3, 0)},  // more on the left: explicit
      {2, 9, 3, 2, 2, 1, 3, Padding::valid()},
  };
  for (const ConvSpec& s : specs) {
    const auto [pl, pr] =
        window_padding("conv1d", s.length, s.kernel, s.stride, s.dilation, s.padding);
    const std::string name = detail::cat("conv1d N=", s.n, " L=", s.length, " C=", s.channels,
                                         " F=", s.filters, " K=", s.kernel, " stride=", s.stride,
                                         " dilation=", s.dilation, " pad=(", pl, ", ", pr, ")");
    expect_parity({name,
                   [s](auto& x) {
                     return std::vector<Tensor>{
                         conv1d(x[0], x[1], s.stride, s.padding, s.dilation)};
                   },
                   {rand64({s.n, s.length, s.channels}, 1),
                    rand64({s.kernel, s.channels, s.filters}, 2) * 0.3},
                   1e-4});
  }
}

TEST(CudaOps, Softmax) {
  REQUIRE_CUDA();
  const std::vector<Case> cases{
      {"last axis",
       [](auto& x) {
         return std::vector<Tensor>{softmax(x[0], -1), log_softmax(x[0], -1)};
       },
       {rand64({6, 10}, 1) * 4.0}},
      {"middle axis",
       [](auto& x) {
         return std::vector<Tensor>{softmax(x[0], 1), log_softmax(x[0], 1)};
       },
       {rand64({3, 7, 5}, 2) * 4.0}},
      {"first axis of a view",
       [](auto& x) { return std::vector<Tensor>{softmax(x[0].transpose(0, 1), 0)}; },
       {rand64({4, 9}, 3)}},
      {"long rows (block per row)",
       [](auto& x) {
         return std::vector<Tensor>{softmax(x[0], 1), log_softmax(x[0], 1)};
       },
       {rand64({3, 5000}, 4) * 4.0}},
  };
  for (const Case& c : cases) expect_parity(c);
}

// The CPU test of the same name, on the warp (rows), block (long rows) and column kernels.
TEST(CudaOps, LogSoftmaxIsPreciseWhenOneEntryDominates) {
  REQUIRE_CUDA();
  Tensor long_rows = full({2, 3000}, 180.0, DType::Float64);
  long_rows.slice(1, 0, 1).fill_(200.0);
  const std::vector<std::pair<Tensor, int64_t>> cases{
      {from_vector<double>({200, 190, 180, 1e-3, 0, -1e-3, -50, 30, 30.5}, {3, 3}), -1},
      {from_vector<double>({200, 190, 180, 1e-3, 0, -1e-3, -50, 30, 30.5}, {3, 3}), 0},
      {long_rows, -1}};
  for (const auto& [x, axis] : cases) {
    const auto ref = log_softmax(x, axis).to_vector<double>();
    const auto got = log_softmax(x.to(DType::Float32).to(kGpu), axis).to_vector<double>();
    ASSERT_EQ(ref.size(), got.size());
    for (size_t i = 0; i < ref.size(); ++i)
      EXPECT_NEAR(got[i], ref[i], 1e-6 * std::fabs(ref[i]) + 1e-30)
          << x.shape().str() << " axis " << axis << ", element " << i;
  }
}

// test_empty.cpp on the GPU: empty axes give empty results (no zero-size launch, no cuDNN or
// CUB call on nothing) or the reduction's identity.
TEST(CudaOps, EmptyTensors) {
  REQUIRE_CUDA();
  for (const Shape& s : {Shape{2, 0}, Shape{0, 3}, Shape{0}}) {
    EXPECT_EQ(softmax(zeros(s, DType::Float32, kGpu)).shape(), s);
    EXPECT_EQ(log_softmax(zeros(s, DType::Float32, kGpu), 0).shape(), s);
    EXPECT_EQ(dropout(zeros(s, DType::Float32, kGpu), 0.5, true).shape(), s);
    EXPECT_EQ((zeros(s, DType::Int64, kGpu) + 1).shape(), s);
  }
  test::expect_values(sum(zeros({2, 0}, DType::Float32, kGpu), {1}), {0, 0});
  EXPECT_TRUE(std::isnan(mean(zeros({0, 3}, DType::Float32, kGpu)).item()));
  Tensor x = zeros({0, 5, 3}, DType::Float32, kGpu), w = ones({2, 3, 4}, DType::Float32, kGpu);
  x.set_requires_grad();
  w.set_requires_grad();
  const Tensor y = conv1d(x, w);
  EXPECT_EQ(y.shape(), (Shape{0, 4, 4}));
  sum(y).backward();
  test::expect_values(w.grad(), std::vector<double>(24, 0.0));
  test::expect_values(conv1d(ones({1, 0, 3}, DType::Float32, kGpu),
                             ones({1, 3, 2}, DType::Float32, kGpu), 1, Padding::explicit_(1, 0)),
                      {0, 0});
  nn::LSTM lstm(3);
  lstm.build({0, 4, 2});
  lstm.to(kGpu);
  EXPECT_EQ(lstm(zeros({0, 4, 2}, DType::Float32, kGpu)).shape(), (Shape{0, 3}));
}

// test_limits.cpp on the GPU, bit for bit with the CPU: wrapping integer arithmetic, defined
// float -> integer casts, exact int64 scalars.
TEST(CudaOps, IntegersAtTheLimits) {
  REQUIRE_CUDA();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max(),
                    kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t big = (int64_t{1} << 61) + 1;
  const Tensor a = from_vector<int64_t>({kMax, kMin, kMin, -1, 7}, {5});
  const Tensor b = from_vector<int64_t>({1, -1, kMin, kMax, 3}, {5});
  const Tensor f = from_vector<double>({NAN, INFINITY, -INFINITY, 1e300, -2.9, 2.9}, {6});
  const std::vector<std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>> cases{
      [](auto& a, auto& b, auto&) { return a + b; },
      [](auto& a, auto& b, auto&) { return a - b; },
      [](auto& a, auto& b, auto&) { return a * b; },
      [](auto& a, auto&, auto&) { return -a; },
      [](auto& a, auto&, auto&) { return abs(a); },
      [](auto& a, auto&, auto&) { return a + big; },
      [](auto& a, auto&, auto&) { return a * 3; },
      [](auto& a, auto&, auto&) { return sum(a); },
      [](auto& a, auto&, auto&) { return sum(a.to(DType::Int32)); },
      [](auto& a, auto& b, auto&) { return a.to(DType::Int32) * b.to(DType::Int32); },
      [](auto&, auto&, auto& f) { return f.to(DType::Int64); },
      [](auto&, auto&, auto& f) { return f.to(DType::Float32).to(DType::Int32); },
      [](auto& a, auto&, auto&) { return full({2}, big, DType::Int64, a.device()); },
      [](auto& a, auto&, auto&) { return arange(big, big + 3, 1, DType::Int64, a.device()); },
      [](auto& a, auto&, auto&) {
        Tensor t = a.clone();
        t.fill_(big);
        const Tensor in[] = {t, a};
        dispatch(op("add_"), in);
        return t;
      },
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Tensor cpu = cases[i](a, b, f), gpu = cases[i](a.to(kGpu), b.to(kGpu), f.to(kGpu));
    EXPECT_TRUE(test::bitwise_equal(cpu, gpu)) << "case " << i;
  }
}

TEST(CudaOps, GatherScatter) {
  REQUIRE_CUDA();
  for (DType index_type : {DType::Int32, DType::Int64}) {
    const Tensor index = (rand64({4, 3}, 1) * 2.49 + 2.5).to(index_type);  // 0..4
    expect_parity({"gather_last",
                   [](auto& x) { return std::vector<Tensor>{gather_last(x[0], x[1])}; },
                   {rand64({4, 3, 5}, 2), index}});
    expect_parity({"scatter_last",
                   [](auto& x) { return std::vector<Tensor>{scatter_last(x[0], x[1], 5)}; },
                   {rand64({4, 3}, 3), index}});
  }
}

TEST(CudaOps, OutOfRangeIndexIsReportedNotWritten) {
  REQUIRE_CUDA();
  const Tensor index = from_vector<int64_t>({0, 7, -1}, {3}, kGpu);
  const Tensor g = scatter_last(ones({3}, DType::Float32, kGpu), index, 4);
  EXPECT_THROW(synchronize(kGpu), ValueError);
  test::expect_values(g, {1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});  // bad rows stay 0
  const Tensor x = ones({3, 4}, DType::Float32, kGpu);
  const Tensor y = gather_last(x, index);
  try {
    y.to_vector<float>();
    ADD_FAILURE() << "an out-of-range index was not reported";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("gather_last"), std::string::npos) << e.what();
  }
  test::expect_values(y, {1, 0, 0});
  test::expect_values(sum(x), {12});  // the runtime is still usable
}

TEST(CudaOps, LstmCell) {
  REQUIRE_CUDA();
  const std::pair<Activation, Activation> configs[] = {{Activation::Tanh, Activation::Sigmoid},
                                                       {Activation::Relu, Activation::HardSigmoid},
                                                       {Activation::Linear, Activation::Sigmoid}};
  for (auto [act, rec] : configs) {
    expect_parity(
        {std::string("lstm_cell ") + std::string(name(act)) + "/" + std::string(name(rec)),
         [act, rec](auto& x) {
           auto [h, c] = lstm_cell(x[0], x[1], act, rec);
           return std::vector<Tensor>{h, c};
         },
         {away_from_zero({3, 16}, 1) * 2.0, rand64({3, 4}, 2)}});
  }
}

TEST(CudaOps, Creation) {
  REQUIRE_CUDA();
  for (DType dt : {DType::Float32, DType::Float64, DType::Int32, DType::Int64}) {
    EXPECT_TRUE(test::bitwise_equal(full({3, 5}, 2.75, dt), full({3, 5}, 2.75, dt, kGpu)))
        << name(dt);
    EXPECT_TRUE(test::bitwise_equal(arange(-3, 7.5, 0.7, dt), arange(-3, 7.5, 0.7, dt, kGpu)))
        << name(dt);
  }
  for (DType dt : {DType::Float32, DType::Float64}) {
    Generator gc(1234), gg(1234, kGpu);
    for (int draw = 0; draw < 3; ++draw) {
      const Tensor a = uniform({1001}, -2.0, 3.0, dt, Device::cpu(), &gc);
      const Tensor b = uniform({1001}, -2.0, 3.0, dt, kGpu, &gg);
      EXPECT_TRUE(test::bitwise_equal(a, b)) << "uniform " << name(dt) << " draw " << draw;
      const Tensor n1 = normal({999}, 0.5, 2.0, dt, Device::cpu(), &gc);
      const Tensor n2 = normal({999}, 0.5, 2.0, dt, kGpu, &gg);
      expect_close(n1, n2, dt == DType::Float32 ? 1e-6 : 1e-12, "normal");
      EXPECT_EQ(gc.offset(), gg.offset());
    }
  }
}

TEST(CudaOps, DropoutMasksMatchTheCpu) {
  REQUIRE_CUDA();
  for (DType dt : {DType::Float32, DType::Float64}) {
    Generator gc(99), gg(99, kGpu);
    const Tensor x = rand64({37, 29}, 1).to(dt);
    for (int draw = 0; draw < 3; ++draw) {
      const Tensor cin[] = {x, gc.state()}, gin[] = {x.to(kGpu), gg.state()};
      const OutList c = dispatch(op("dropout"), cin, DropoutAttrs{0.3});
      const OutList g = dispatch(op("dropout"), gin, DropoutAttrs{0.3});
      EXPECT_TRUE(test::bitwise_equal(c[1], g[1])) << "mask, draw " << draw;
      EXPECT_TRUE(test::bitwise_equal(c[0], g[0])) << "output, draw " << draw;
      EXPECT_EQ(gc.offset(), gg.offset());
    }
  }
  // Through the public op, with its backward.
  Generator gc(5), gg(5, kGpu);
  const Tensor x = rand64({8, 9}, 2);
  expect_parity({"dropout",
                 [&](auto& in) {
                   Generator& g = in[0].device().is_cuda() ? gg : gc;
                   return std::vector<Tensor>{dropout(in[0], 0.4, true, &g)};
                 },
                 {x},
                 1e-6,
                 true,
                 false});
}

TEST(CudaOps, ProfilingTimesKernels) {
  REQUIRE_CUDA();
  Ledger& ledger = Ledger::global();
  const int64_t timed = ledger.get(Counter::KernelsTimed), ns = ledger.get(Counter::KernelNs);
  ledger.set_profiling(true);
  const Tensor x = ones({256, 256}, DType::Float32, kGpu);
  const Tensor y = matmul(x, x);
  ledger.set_profiling(false);
  EXPECT_GT(ledger.get(Counter::KernelsTimed), timed);
  EXPECT_GT(ledger.get(Counter::KernelNs), ns);
  test::expect_values(y.slice(0, 0, 1).slice(1, 0, 2), {256, 256});
}

}  // namespace
}  // namespace encore
