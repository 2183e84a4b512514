// What the differential tests of the float32 fast paths share (tests/cpp/test_fastpath_*.cpp):
// the run's size and seed, random configurations, and the comparison with a float64 reference
// under a bound derived from float32 rounding.
//
// The bound: a float32 sum of n products, in any order, blocked, threaded or fused, is within
// gamma_n * sum|terms| of the exact sum (gamma_n ~ n * u, u = 2^-24), so each reference element
// comes with the sum of the absolute values of its terms (the absolute-value problem), and the
// fast path must be within 2 * u * (n + 4) times that: two times the worst case, the 4 for the
// few roundings around the sum (bias, epilogue, a scale). A wrong index, a lost tap or a wrong
// layout is off by O(sum|terms|), orders of magnitude above it. An element whose terms are all
// padding must be exactly zero.
//
// The size: ENCORE_FASTPATH_CONFIGS (default 1100) random configurations over all the tests,
// each test its share; ENCORE_FASTPATH_SEED (default 1) picks them; ENCORE_FASTPATH_ONLY=i
// runs configuration i of each test alone. A failure names its test, seed and configuration.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "ops/activation.h"
#include "ops/ops.h"
#include "ops/tensor.h"

namespace encore::fastpath {

constexpr double kU = 0x1p-24;  // float32's unit roundoff

inline int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoll(v, nullptr, 10) : fallback;
}

/// One test's configurations: `share` of ENCORE_FASTPATH_CONFIGS.
struct Configs {
  const char* test;
  uint64_t seed = static_cast<uint64_t>(env_int("ENCORE_FASTPATH_SEED", 1));
  int64_t first = 0, count = 0;
  Configs(const char* test, double share) : test(test) {
    const int64_t only = env_int("ENCORE_FASTPATH_ONLY", -1);
    if (only >= 0) {
      first = only;
      count = 1;
    } else {
      count = std::max<int64_t>(
          1, std::llround(share * static_cast<double>(env_int("ENCORE_FASTPATH_CONFIGS", 1100))));
    }
  }
  /// How to run configuration i alone.
  std::string reproduce(int64_t i) const {
    std::ostringstream s;
    s << "ENCORE_FASTPATH_SEED=" << seed << " ENCORE_FASTPATH_ONLY=" << i
      << " encore_tests --gtest_filter=FastPath." << test << ": ";
    return s.str();
  }
};

/// The random source of configuration i of a test: its own stream, whatever ran before.
class Rng {
 public:
  Rng(uint64_t seed, const char* test, int64_t i)
      : gen_(seed * 0x9E3779B97F4A7C15ull ^ std::hash<std::string>{}(test) ^
             static_cast<uint64_t>(i) * 0xBF58476D1CE4E5B9ull) {}
  int64_t integer(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(gen_);
  }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(gen_) < p; }
  template <class T> const T& pick(const std::vector<T>& v) {
    return v[static_cast<size_t>(integer(0, static_cast<int64_t>(v.size()) - 1))];
  }
  /// float32 values uniform in [-1, 1), held as doubles (exactly).
  std::vector<double> values(int64_t n) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<double> v(static_cast<size_t>(n));
    for (double& x : v) x = u(gen_);
    return v;
  }

 private:
  std::mt19937_64 gen_;
};

/// A float32 tensor holding `v` (which float32 represents exactly).
inline Tensor f32(const std::vector<double>& v, const Shape& shape, bool requires_grad = false) {
  Tensor t = from_vector(std::vector<float>(v.begin(), v.end()), shape);
  if (requires_grad) t.set_requires_grad(true);
  return t;
}
/// The same values in float64.
inline Tensor f64(const std::vector<double>& v, const Shape& shape, bool requires_grad = false) {
  Tensor t = from_vector(v, shape);
  if (requires_grad) t.set_requires_grad(true);
  return t;
}

/// A reference result: per element its exact value and the |error| allowed.
struct Expected {
  Shape shape;
  std::vector<double> value, bound;
  explicit Expected(Shape s = {})
      : shape(std::move(s)), value(static_cast<size_t>(shape.numel())), bound(value.size()) {}
};

/// Bounds each element by 2 u (n + 4) times its sum of |terms| in `mag`, plus twice `err` (the
/// error its terms carry in from an earlier rounding, summed in absolute value) when given.
inline void bound_sums(Expected& e, const std::vector<double>& mag, int64_t n,
                       const std::vector<double>& err = {}) {
  for (size_t i = 0; i < mag.size(); ++i)
    e.bound[i] = 2 * kU * static_cast<double>(n + 4) * mag[i] + (err.empty() ? 0 : 2 * err[i]);
}

/// "" when `got` is within the bound everywhere, else where and by how much it is not (a NaN
/// or an infinity fails).
inline std::string violation(const char* what, const Tensor& got, const Expected& want) {
  std::ostringstream s;
  if (!got.defined()) return std::string(what) + " is undefined";
  if (!(got.shape() == want.shape)) {
    s << what << " has shape " << got.shape().str() << ", the reference " << want.shape.str();
    return s.str();
  }
  const std::vector<double> g = got.to_vector<double>();
  size_t worst = 0;
  double ratio = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const double err = std::fabs(g[i] - want.value[i]);
    const double r = std::isfinite(err) ? (err == 0 ? 0 : err / want.bound[i]) : INFINITY;
    if (r > ratio) ratio = r, worst = i;
  }
  if (ratio <= 1) return "";
  s << what << "[" << worst << "] = " << g[worst] << ", the reference " << want.value[worst]
    << " +- " << want.bound[worst] << " (" << ratio << "x the bound; "
    << std::fabs(g[worst] - want.value[worst]) / std::max(std::fabs(want.value[worst]), 1e-300)
    << " relative)";
  return s.str();
}

/// One output of a fast path and its reference.
struct Check {
  const char* what;
  Tensor got;
  const Expected* want;
};
/// The first of `checks` that violates its bound, "" when none does.
inline std::string first_violation(std::initializer_list<Check> checks) {
  for (const Check& c : checks)
    if (std::string v = violation(c.what, c.got, *c.want); !v.empty()) return v;
  return "";
}

/// Keras' activations in float64, their Lipschitz constants, and their derivatives as
/// encore's backward takes them: from the output y.
inline double activate(Activation a, double x) {
  switch (a) {
    case Activation::Tanh:
      return std::tanh(x);
    case Activation::Sigmoid:
      return 1 / (1 + std::exp(-x));
    case Activation::Relu:
      return x > 0 ? x : 0;
    case Activation::HardSigmoid:
      return std::min(std::max(0.2 * x + 0.5, 0.0), 1.0);
    default:
      return x;
  }
}
inline double lipschitz(Activation a) {
  return a == Activation::Sigmoid ? 0.25 : a == Activation::HardSigmoid ? 0.2 : 1.0;
}
inline double activation_grad(Activation a, double g, double y) {
  switch (a) {
    case Activation::Tanh:
      return g * (1 - y * y);
    case Activation::Sigmoid:
      return g * (y * (1 - y));
    case Activation::Relu:
      return y > 0 ? g : 0;
    case Activation::HardSigmoid:
      return y > 0 && y < 1 ? g * 0.2 : 0;
    default:
      return g;
  }
}
/// The float32 rounding error of activation_grad: tanh's 1 - y * y cancels as |y| nears 1, where
/// the rounding of y * y is all that is left.
inline double activation_grad_error(Activation a, double g, double y) {
  switch (a) {
    case Activation::Tanh:
      return kU * std::fabs(g) * (y * y + 2 * std::fabs(1 - y * y));
    case Activation::Sigmoid:
      return 3 * kU * std::fabs(g * y * (1 - y));
    case Activation::HardSigmoid:
      return 2 * kU * std::fabs(0.2 * g);
    default:
      return 0;
  }
}
/// An activation's float32 output from a pre-activation within `pre_bound`: its own rounding
/// (oneDNN's tanh and sigmoid are within a few ulp) on top.
inline double activation_bound(Activation a, double pre_bound, double y) {
  return lipschitz(a) * pre_bound + (a == Activation::Linear ? 0 : 16 * kU * (std::fabs(y) + kU));
}
inline const std::vector<Activation>& fusable_activations() {
  static const std::vector<Activation> all = {Activation::Linear, Activation::Relu,
                                              Activation::Tanh, Activation::Sigmoid,
                                              Activation::HardSigmoid};
  return all;
}

/// Collects a test's failures; stops it after a few.
struct Failures {
  const Configs& run;
  int count = 0;
  /// Records the failure of configuration i (described by `config`), if `what` says one.
  bool add(int64_t i, const std::string& config, const std::string& what) {
    if (what.empty()) return false;
    ADD_FAILURE() << run.reproduce(i) << config << ": " << what;
    return ++count >= 5;
  }
};

}  // namespace encore::fastpath
