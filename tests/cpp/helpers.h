// Shared test utilities.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>

#include "core/modes.h"
#include "graph/trace.h"
#include "nn/losses.h"
#include "nn/module.h"
#include "nn/optim.h"
#include "ops/ops.h"
#include "ops/random.h"
#include "ops/tensor.h"

namespace encore::test {

/// Random float64 values in [-1, 1) (never zeros) from a fixed seed.
inline Tensor rand64(const Shape& shape, uint64_t seed = 1) {
  Generator g(seed);
  return uniform(shape, -1.0, 1.0, DType::Float64, Device::cpu(), &g);
}
inline Tensor rand32(const Shape& shape, uint64_t seed = 1) {
  Generator g(seed);
  return uniform(shape, -1.0, 1.0, DType::Float32, Device::cpu(), &g);
}

/// Max |a - b| after converting both to float64 on the CPU; shapes must match.
inline double max_abs_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape()) << a.shape().str() << " vs " << b.shape().str();
  if (!(a.shape() == b.shape())) return INFINITY;
  const auto x = a.to_vector<double>(), y = b.to_vector<double>();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) != std::isnan(y[i])) return INFINITY;  // std::max would drop a NaN
    m = std::max(m, std::fabs(x[i] - y[i]));
  }
  return m;
}

inline void expect_values(const Tensor& t, const std::vector<double>& expected, double tol = 1e-6) {
  const auto v = t.to_vector<double>();
  ASSERT_EQ(v.size(), expected.size());
  for (size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(v[i], expected[i], tol) << "at " << i;
}

/// `f` throws an E whose message contains `needle`.
template <class E, class F> void expect_throw_message(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no exception; expected one saying: " << needle;
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

/// |got - ref| <= tol * max(1, max |ref|), element by element.
inline void expect_close(const Tensor& ref, const Tensor& got, double tol,
                         const std::string& what) {
  ASSERT_TRUE(got.defined()) << what << " is undefined";
  ASSERT_EQ(ref.shape(), got.shape()) << what;
  const auto r = ref.to_vector<double>(), g = got.to_vector<double>();
  double scale = 1.0, worst = 0.0;
  size_t at = 0;
  for (double v : r) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < r.size(); ++i) {
    // A NaN where the reference has a number must fail (NaN compares false with everything).
    const double d = std::isnan(r[i]) != std::isnan(g[i]) ? INFINITY : std::fabs(r[i] - g[i]);
    if (d > worst) worst = d, at = i;
  }
  EXPECT_LE(worst, tol * scale) << what << " differs most at element " << at << ": " << r[at]
                                << " vs " << g[at];
}

/// The GPU the CUDA tests run on; they start with REQUIRE_CUDA().
inline const Device kGpu = Device::cuda(0);
/// Whether the run expects a GPU (ENCORE_EXPECT_CUDA=1, which tests/gpu/run.sh sets on the lent
/// GPU machine): there a CUDA test that finds none fails instead of skipping, so that a plugin
/// that did not load cannot pass for a green run.
inline bool cuda_expected() {
  const char* v = std::getenv("ENCORE_EXPECT_CUDA");
  return v && std::string(v) == "1";
}
#define REQUIRE_CUDA()                                                    \
  if (!cuda_available()) {                                                \
    if (::encore::test::cuda_expected())                                  \
      FAIL() << "no CUDA device where ENCORE_EXPECT_CUDA=1 expects one: " \
             << ::encore::cuda::unavailable_reason();                     \
    GTEST_SKIP() << "no CUDA device";                                     \
  }

inline bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (!(a.shape() == b.shape()) || a.dtype() != b.dtype()) return false;
  const Tensor x = a.to(Device::cpu()).contiguous(), y = b.to(Device::cpu()).contiguous();
  return std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

// Finite-difference check of every parameter's gradient of loss(module(x)), in float64.
inline void check_parameter_gradients(nn::Module& m, const Tensor& x) {
  m.build(x.shape());
  m.to(DType::Float64);
  const Tensor proj = rand64(m(x).shape(), 99);
  auto loss = [&] { return sum(m(x) * proj); };
  for (Tensor& p : m.parameters()) p.set_grad(Tensor());
  loss().backward();
  NoGradGuard no_grad;
  for (auto& [name, p] : m.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    const auto analytic = p.grad().to_vector<double>();
    double* d = p.data<double>();
    for (int64_t j = 0; j < p.numel(); ++j) {
      const double saved = d[j];
      d[j] = saved + 1e-6;
      const double plus = loss().item();
      d[j] = saved - 1e-6;
      const double minus = loss().item();
      d[j] = saved;
      EXPECT_NEAR(analytic[j], (plus - minus) / 2e-6, 1e-5 + 1e-4 * std::fabs(analytic[j]))
          << name << "[" << j << "]";
    }
  }
}

// Four Adam steps of `m` (built for (4, 7, 3) inputs by the caller's `make`) on seeded data,
// eager and traced from the same seed: the losses and the parameters agree bitwise.
inline void expect_eager_and_traced_training_bitwise(
    const std::function<void(nn::Sequential&)>& make, uint64_t seed) {
  auto run = [&](bool traced) {
    manual_seed(seed);
    nn::Sequential m;
    make(m);
    m.build({4, 7, 3});
    nn::Adam adam(m.parameters(), 1e-2);
    auto step = [&](const Tensor& x, const Tensor& y) {
      adam.zero_grad();
      Tensor loss = nn::mean_squared_error(y, m(x));
      loss.backward();
      adam.step();
      return loss;
    };
    auto traced_step = trace(step);
    std::vector<Tensor> out;
    for (int i = 0; i < 4; ++i) {
      const Tensor x = rand32({4, 7, 3}, 100 + i), y = rand32({4, 1}, 200 + i);
      out.push_back(traced ? traced_step(x, y) : step(x, y));
    }
    const std::vector<Tensor> params = m.parameters();
    out.insert(out.end(), params.begin(), params.end());
    return out;
  };
  const auto eager = run(false), traced = run(true);
  ASSERT_EQ(eager.size(), traced.size());
  for (size_t i = 0; i < eager.size(); ++i) EXPECT_TRUE(bitwise_equal(eager[i], traced[i])) << i;
}

}  // namespace encore::test
