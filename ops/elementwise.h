// The elementwise ops' list, attributes and functor construction, shared by their rows and CPU
// kernels (ops/defs/elementwise.cpp) and their CUDA kernels (ops/cuda/unary.cu, binary.cu).
// The math itself is the functors of ops/functors.h.
#pragma once

#include <string_view>
#include <tuple>

#include "ops/activation.h"
#include "ops/functors.h"
#include "ops/op.h"

namespace encore {

enum class DTypeClass { Float, Numeric };

/// An elementwise op whose kernels are its functor over one input (Unary) or two broadcast ones
/// (Binary), on the dtypes of its class.
template <class F, DTypeClass C = DTypeClass::Numeric> struct Unary {
  std::string_view name;
  using Functor = F;
  static constexpr DTypeClass dtypes = C;
  static constexpr int arity = 1;
};
template <class F, DTypeClass C = DTypeClass::Numeric> struct Binary {
  std::string_view name;
  using Functor = F;
  static constexpr DTypeClass dtypes = C;
  static constexpr int arity = 2;
};

/// The one list of those ops for both backends: the CPU rows take their kernels and dtype checks
/// from it by name (ops/defs/elementwise.cpp) and the CUDA backend registers a kernel for each
/// (ops/cuda/unary.cu, binary.cu). Such an op is a functor, a line here and its row.
inline constexpr std::tuple kElementwiseOps{
    Unary<fn::Neg>{"neg"},
    Unary<fn::Exp, DTypeClass::Float>{"exp"},
    Unary<fn::Log, DTypeClass::Float>{"log"},
    Unary<fn::Sqrt, DTypeClass::Float>{"sqrt"},
    Unary<fn::Erf, DTypeClass::Float>{"erf"},
    Unary<fn::Tanh, DTypeClass::Float>{"tanh"},
    Unary<fn::Sigmoid, DTypeClass::Float>{"sigmoid"},
    Unary<fn::Relu>{"relu"},
    Unary<fn::Abs>{"abs"},
    Unary<fn::Softplus, DTypeClass::Float>{"softplus"},
    Unary<fn::LeakyRelu, DTypeClass::Float>{"leaky_relu"},
    Unary<fn::PowScalar, DTypeClass::Float>{"pow_scalar"},
    Unary<fn::AddScalar>{"add_scalar"},
    Unary<fn::MulScalar>{"mul_scalar"},
    Unary<fn::Clip>{"clip"},
    Binary<fn::Add>{"add"},
    Binary<fn::Sub>{"sub"},
    Binary<fn::Mul>{"mul"},
    Binary<fn::Div>{"div"},
    Binary<fn::Maximum>{"maximum"},
    Binary<fn::Minimum>{"minimum"},
    Binary<fn::Eq>{"eq"},
    Binary<fn::Ne>{"ne"},
    Binary<fn::Gt>{"gt"},
    Binary<fn::Ge>{"ge"},
    Binary<fn::Lt>{"lt"},
    Binary<fn::Le>{"le"},
    Binary<fn::BceLogits, DTypeClass::Float>{"binary_crossentropy_logits"},
    Binary<fn::BceLogitsGrad, DTypeClass::Float>{"binary_crossentropy_logits_grad"},
};

/// Calls `f` with each entry of kElementwiseOps.
template <class F> void for_each_elementwise_op(F&& f) {
  std::apply([&](const auto&... op) { (f(op), ...); }, kElementwiseOps);
}

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
template <> inline fn::LeakyRelu make_functor(const Attrs& a) {
  return {a.as<ScalarAttrs>().value.d};
}
template <> inline fn::PowScalar make_functor(const Attrs& a) {
  return {a.as<ScalarAttrs>().value.d};
}
template <> inline fn::AddScalar make_functor(const Attrs& a) {
  return {a.as<ScalarAttrs>().value};
}
template <> inline fn::MulScalar make_functor(const Attrs& a) {
  return {a.as<ScalarAttrs>().value};
}
template <> inline fn::Clip make_functor(const Attrs& a) {
  const auto& c = a.as<ClipAttrs>();
  return {c.lo, c.hi};
}

/// gy * activation'(.) from the activation's output y, as a two-input functor (gy, y).
template <class A> struct OutputGrad {
  template <class T> ENCORE_HD T operator()(T gy, T y) const { return A{}.output_grad(gy, y); }
};

/// Calls `f` with the output-gradient functor of activation `a` (OutputGrad<act::Relu>, ...): the
/// choice is made once per kernel, so that the elementwise loop vectorizes. An activation without
/// one (not fusable_activation) is a ValueError naming `op`.
template <class F> void with_activation_grad(Activation a, const char* op, F&& f) {
  visit_activation(a, [&](auto act) {
    using A = decltype(act);
    if constexpr (A::grad_from_output)
      f(OutputGrad<A>{});
    else
      throw ValueError(
          detail::cat("[", op, "] has no gradient from the output of activation '", A::name, "'"));
  });
}

}  // namespace encore
