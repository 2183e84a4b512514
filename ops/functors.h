// Elementwise math shared by the CPU and CUDA kernels, so both backends compute the same
// formula. Math goes through overloads (expf for float, exp for double) that exist on the
// host and the device alike; a silent float->double promotion would break CPU/GPU parity.
#pragma once

#include <cmath>  // not <math.h>: installed headers include C++ headers only (check_install.py)

#include <cstdint>
#include <limits>
#include <type_traits>

#include "core/host_device.h"
#include "core/scalar.h"

namespace encore::fn {

ENCORE_HD float m_exp(float x) { return ::expf(x); }
ENCORE_HD double m_exp(double x) { return ::exp(x); }
ENCORE_HD float m_log(float x) { return ::logf(x); }
ENCORE_HD double m_log(double x) { return ::log(x); }
ENCORE_HD float m_log1p(float x) { return ::log1pf(x); }
ENCORE_HD double m_log1p(double x) { return ::log1p(x); }
ENCORE_HD float m_sqrt(float x) { return ::sqrtf(x); }
ENCORE_HD double m_sqrt(double x) { return ::sqrt(x); }
ENCORE_HD float m_tanh(float x) { return ::tanhf(x); }
ENCORE_HD double m_tanh(double x) { return ::tanh(x); }
ENCORE_HD float m_pow(float x, float p) { return ::powf(x, p); }
ENCORE_HD double m_pow(double x, double p) { return ::pow(x, p); }
ENCORE_HD float m_erf(float x) { return ::erff(x); }
ENCORE_HD double m_erf(double x) { return ::erf(x); }
// Integer arithmetic wraps modulo 2^bits, as in NumPy: it goes through the unsigned type,
// because signed overflow is undefined behaviour in C++ (and CUDA). Floats are unchanged.
template <class T> ENCORE_HD T wrap_add(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}
template <class T> ENCORE_HD T wrap_sub(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
  } else {
    return a - b;
  }
}
template <class T> ENCORE_HD T wrap_mul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}
template <class T> ENCORE_HD T wrap_neg(T x) { return wrap_sub(T(0), x); }
// abs(INT_MIN) is INT_MIN, as in NumPy.
template <class T> ENCORE_HD T m_abs(T x) { return x < T(0) ? wrap_neg(x) : x; }

// Conversion between dtypes. Float to integer truncates toward zero; NaN gives 0 and values
// beyond the integer range saturate to its ends (C++ leaves all three undefined, and x86 would
// give INT_MIN for each).
template <class TD, class TS> ENCORE_HD TD cast_value(TS s) {
  if constexpr (std::is_integral_v<TD> && std::is_floating_point_v<TS>) {
    using L = std::numeric_limits<TD>;
    // -2^(bits-1) is exact in every float type; 2^(bits-1) is the first value above the range.
    constexpr TS lo = static_cast<TS>(L::min());
    if (s != s) return TD(0);
    if (s <= lo) return L::min();
    if (s >= -lo) return L::max();
  }
  return static_cast<TD>(s);
}
template <class T> ENCORE_HD T m_max(T a, T b) { return a < b ? b : a; }
template <class T> ENCORE_HD T m_min(T a, T b) { return b < a ? b : a; }
template <class T> ENCORE_HD T m_sigmoid(T x) { return T(1) / (T(1) + m_exp(-x)); }
// Keras' hard sigmoid: clip(0.2 x + 0.5, 0, 1). The argument order keeps a NaN, as clip does
// (m_max(0, NaN) would be 0: the fused epilogues turned NaN into 0 where the activation op
// kept it).
template <class T> ENCORE_HD T m_hard_sigmoid(T x) {
  return m_min(m_max(T(0.2) * x + T(0.5), T(0)), T(1));
}
// Exact GELU, x * Phi(x) (Keras' default, approximate=False), and its derivative
// Phi(x) + x * phi(x).
template <class T> ENCORE_HD T m_gelu(T x) {
  return T(0.5) * x * (T(1) + m_erf(x * T(0.70710678118654752440)));  // 1 / sqrt(2)
}
template <class T> ENCORE_HD T m_gelu_grad(T x) {
  const T pdf = T(0.39894228040143267794) * m_exp(T(-0.5) * x * x);  // 1 / sqrt(2 pi)
  return T(0.5) * (T(1) + m_erf(x * T(0.70710678118654752440))) + x * pdf;
}
// log(1 + e^x) without overflow for large x.
template <class T> ENCORE_HD T m_softplus(T x) {
  return m_max(x, T(0)) + m_log1p(m_exp(-m_abs(x)));
}

// The denominator of softmax over a row with maximum m, sum_i exp(a_i - m), kept as the
// count of entries equal to m (each exactly 1) plus the sum of the others, so that
// log(sum) = log1p((ties - 1) + rest) keeps the precision of the small terms when one entry
// dominates: log_softmax([200, 190, 180])[0] is -4.54010e-5 in float32, not -4.5419e-5 (the sum
// rounded to 1.0000454) or -4.5776e-5 (m + log(sum) rounded at the scale of 200). A NaN entry
// lands in `rest` and propagates.
template <class T> struct SoftmaxSum {
  T ties = T(0), rest = T(0);
  ENCORE_HD void add(T a, T m) {
    if (a == m)
      ties += T(1);
    else
      rest += m_exp(a - m);
  }
  ENCORE_HD T total() const { return ties + rest; }
  ENCORE_HD T log_total() const { return m_log1p((ties - T(1)) + rest); }
};
// log_softmax as (a - m) - log(sum): a - (m + log(sum)) would round the log term at the scale
// of the largest entry.
template <class T, bool Log>
ENCORE_HD T softmax_value(T a, T m, const SoftmaxSum<T>& s, T log_total) {
  if constexpr (Log)
    return (a - m) - log_total;
  else
    return m_exp(a - m) / s.total();
}

// A scalar operand in the tensor's type: exact for integers (the op's shape inference has
// checked that the dtype holds it), the double otherwise.
template <class T> ENCORE_HD T scalar_as(const Scalar& s) {
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(s.i);
  else
    return static_cast<T>(s.d);
}

// One-input functors. `Float` ops reject integer dtypes at shape inference.
struct Neg {
  template <class T> ENCORE_HD T operator()(T x) const { return wrap_neg(x); }
};
struct Exp {
  template <class T> ENCORE_HD T operator()(T x) const { return m_exp(x); }
};
struct Log {
  template <class T> ENCORE_HD T operator()(T x) const { return m_log(x); }
};
struct Sqrt {
  template <class T> ENCORE_HD T operator()(T x) const { return m_sqrt(x); }
};
struct Erf {
  template <class T> ENCORE_HD T operator()(T x) const { return m_erf(x); }
};
struct Tanh {
  template <class T> ENCORE_HD T operator()(T x) const { return m_tanh(x); }
};
struct Sigmoid {
  template <class T> ENCORE_HD T operator()(T x) const { return m_sigmoid(x); }
};
struct Relu {
  template <class T> ENCORE_HD T operator()(T x) const { return m_max(x, T(0)); }
};
struct Abs {
  template <class T> ENCORE_HD T operator()(T x) const { return m_abs(x); }
};
struct Softplus {
  template <class T> ENCORE_HD T operator()(T x) const { return m_softplus(x); }
};
struct LeakyRelu {
  double alpha;
  template <class T> ENCORE_HD T operator()(T x) const { return x > T(0) ? x : T(alpha) * x; }
};
struct PowScalar {
  double p;
  template <class T> ENCORE_HD T operator()(T x) const { return m_pow(x, T(p)); }
};
struct AddScalar {
  Scalar v;
  template <class T> ENCORE_HD T operator()(T x) const { return wrap_add(x, scalar_as<T>(v)); }
};
struct MulScalar {
  Scalar v;
  template <class T> ENCORE_HD T operator()(T x) const { return wrap_mul(x, scalar_as<T>(v)); }
};
struct Clip {
  Scalar lo, hi;
  template <class T> ENCORE_HD T operator()(T x) const {
    return m_min(m_max(x, scalar_as<T>(lo)), scalar_as<T>(hi));
  }
};

// Two-input functors.
struct Add {
  template <class T> ENCORE_HD T operator()(T a, T b) const { return wrap_add(a, b); }
};
struct Sub {
  template <class T> ENCORE_HD T operator()(T a, T b) const { return wrap_sub(a, b); }
};
struct Mul {
  template <class T> ENCORE_HD T operator()(T a, T b) const { return wrap_mul(a, b); }
};
// Integer division by zero and MIN / -1 are undefined and trap (SIGFPE) on x86: they give 0
// (as NumPy does) and the wrapped -a instead.
struct Div {
  template <class T> ENCORE_HD T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      if (b == T(0)) return T(0);
      if (b == T(-1)) return wrap_neg(a);
    }
    return a / b;
  }
};
struct Maximum {
  template <class T> ENCORE_HD T operator()(T a, T b) const { return m_max(a, b); }
};
struct Minimum {
  template <class T> ENCORE_HD T operator()(T a, T b) const { return m_min(a, b); }
};
struct Eq {
  template <class T> ENCORE_HD T operator()(T a, T b) const { return T(a == b); }
};
struct Ne {
  template <class T> ENCORE_HD T operator()(T a, T b) const { return T(a != b); }
};
struct Gt {
  template <class T> ENCORE_HD T operator()(T a, T b) const { return T(a > b); }
};
struct Ge {
  template <class T> ENCORE_HD T operator()(T a, T b) const { return T(a >= b); }
};
struct Lt {
  template <class T> ENCORE_HD T operator()(T a, T b) const { return T(a < b); }
};
struct Le {
  template <class T> ENCORE_HD T operator()(T a, T b) const { return T(a <= b); }
};

// Binary cross-entropy of logits z against targets y, softplus(z) - z y (= -(y log sigmoid(z) +
// (1 - y) log(1 - sigmoid(z))) without rounding through the probability), and its derivative in
// z, sigmoid(z) - y.
struct BceLogits {
  template <class T> ENCORE_HD T operator()(T z, T y) const { return m_softplus(z) - z * y; }
};
struct BceLogitsGrad {
  template <class T> ENCORE_HD T operator()(T z, T y) const { return m_sigmoid(z) - y; }
};

}  // namespace encore::fn
