// The elementwise ops: one line each in the tables below — its name, its functor
// (ops/functors.h, shared by the CPU and CUDA kernels), the dtypes it takes, and the values its
// test example uses. The rows (ops/defs/elementwise.cpp) and the CUDA kernels
// (ops/cuda/unary.cu, binary.cu) are stamped from these lines, so adding an elementwise op
// touches its line, its functor and its backward formula.
#pragma once

#include "ops/functors.h"
#include "ops/op.h"

// X(op, Functor, Float|Numeric, example values)
#define ENCORE_UNARY_OPS(X)                                                                  \
  X(neg, Neg, Numeric, Uniform) X(exp, Exp, Float, Uniform) X(log, Log, Float, Positive)      \
  X(sqrt, Sqrt, Float, Positive) X(tanh, Tanh, Float, Uniform)                               \
  X(sigmoid, Sigmoid, Float, Uniform) X(relu, Relu, Numeric, Uniform)                        \
  X(abs, Abs, Numeric, Uniform) X(softplus, Softplus, Float, Uniform)                         \
  X(leaky_relu, LeakyRelu, Float, Uniform) X(pow_scalar, PowScalar, Float, Positive)         \
  X(add_scalar, AddScalar, Numeric, Uniform) X(mul_scalar, MulScalar, Numeric, Uniform)      \
  X(clip, Clip, Numeric, Uniform)

#define ENCORE_BINARY_OPS(X)                                                                 \
  X(add, Add, Numeric, Uniform) X(sub, Sub, Numeric, Uniform) X(mul, Mul, Numeric, Uniform)  \
  X(div, Div, Numeric, Positive) X(maximum, Maximum, Numeric, Distinct)                      \
  X(minimum, Minimum, Numeric, Distinct) X(eq, Eq, Numeric, Uniform)                         \
  X(ne, Ne, Numeric, Uniform) X(gt, Gt, Numeric, Uniform) X(ge, Ge, Numeric, Uniform)        \
  X(lt, Lt, Numeric, Uniform) X(le, Le, Numeric, Uniform)

namespace encore {

enum class DTypeClass { Float, Numeric };

/// add_scalar, mul_scalar, pow_scalar, leaky_relu (alpha), fill_, add_scalar_.
struct ScalarAttrs {
  Scalar value;
  std::string str() const { return "value=" + value.str(); }
  bool operator==(const ScalarAttrs&) const = default;
};
struct ClipAttrs {
  Scalar lo, hi;
  std::string str() const { return "lo=" + lo.str() + ", hi=" + hi.str(); }
  bool operator==(const ClipAttrs&) const = default;
};

/// Builds a functor from an op's attributes (most functors have none).
template <class F> F make_functor(const Attrs&) { return F{}; }
template <> inline fn::LeakyRelu make_functor(const Attrs& a) { return {a.as<ScalarAttrs>().value.d}; }
template <> inline fn::PowScalar make_functor(const Attrs& a) { return {a.as<ScalarAttrs>().value.d}; }
template <> inline fn::AddScalar make_functor(const Attrs& a) { return {a.as<ScalarAttrs>().value}; }
template <> inline fn::MulScalar make_functor(const Attrs& a) { return {a.as<ScalarAttrs>().value}; }
template <> inline fn::Clip make_functor(const Attrs& a) {
  const auto& c = a.as<ClipAttrs>();
  return {c.lo, c.hi};
}

}  // namespace encore
