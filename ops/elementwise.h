// The elementwise op tables: op name, functor (ops/functors.h), and which dtypes it accepts.
// Definitions (ops/defs), CPU kernels and CUDA kernels are all stamped from these lists, so
// adding an elementwise op touches this table, its functor, and its backward formula.
#pragma once

#include <variant>

#include "ops/functors.h"

// X(op, Functor, Float|Numeric)
#define ENCORE_UNARY_OPS(X)                                                          \
  X(neg, Neg, Numeric) X(exp, Exp, Float) X(log, Log, Float) X(sqrt, Sqrt, Float)    \
  X(tanh, Tanh, Float) X(sigmoid, Sigmoid, Float) X(relu, Relu, Numeric)             \
  X(abs, Abs, Numeric) X(softplus, Softplus, Float) X(leaky_relu, LeakyRelu, Float)  \
  X(pow_scalar, PowScalar, Float) X(add_scalar, AddScalar, Numeric)                  \
  X(mul_scalar, MulScalar, Numeric) X(clip, Clip, Numeric)

#define ENCORE_BINARY_OPS(X)                                                                \
  X(add, Add, Numeric) X(sub, Sub, Numeric) X(mul, Mul, Numeric) X(div, Div, Numeric)      \
  X(maximum, Maximum, Numeric) X(minimum, Minimum, Numeric) X(eq, Eq, Numeric)             \
  X(ne, Ne, Numeric) X(gt, Gt, Numeric) X(ge, Ge, Numeric) X(lt, Lt, Numeric) X(le, Le, Numeric)

namespace encore {

enum class DTypeClass { Float, Numeric };

/// Builds a functor from an op's attributes (most functors have none).
template <class F> F make_functor(const Attrs&) { return F{}; }
template <> inline fn::LeakyRelu make_functor(const Attrs& a) { return {std::get<ScalarAttrs>(a).value.d}; }
template <> inline fn::PowScalar make_functor(const Attrs& a) { return {std::get<ScalarAttrs>(a).value.d}; }
template <> inline fn::AddScalar make_functor(const Attrs& a) { return {std::get<ScalarAttrs>(a).value}; }
template <> inline fn::MulScalar make_functor(const Attrs& a) { return {std::get<ScalarAttrs>(a).value}; }
template <> inline fn::Clip make_functor(const Attrs& a) {
  const auto& c = std::get<ClipAttrs>(a);
  return {c.lo, c.hi};
}

}  // namespace encore
