// The elementwise ops' attributes and functor construction, shared by their rows and CPU
// kernels (ops/defs/elementwise.cpp) and their CUDA kernels (ops/cuda/unary.cu, binary.cu).
// The math itself is the functors of ops/functors.h.
#pragma once

#include "ops/functors.h"
#include "ops/op.h"

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

/// Calls `f` with the gradient functor of activation `a` (fn::ReluGrad, ...): the choice is made
/// once per kernel, so that the elementwise loop vectorizes. Gelu and softmax have none
/// (fusable_activation): ValueError naming `op`.
template <class F> decltype(auto) with_activation_grad(Activation a, const char* op, F&& f) {
  switch (a) {
    case Activation::Relu: return f(fn::ReluGrad{});
    case Activation::Tanh: return f(fn::TanhGrad{});
    case Activation::Sigmoid: return f(fn::SigmoidGrad{});
    case Activation::HardSigmoid: return f(fn::HardSigmoidGrad{});
    case Activation::Linear: return f(fn::LinearGrad{});
    case Activation::Gelu:
    case Activation::Softmax: break;
  }
  throw ValueError(detail::cat("[", op, "] has no gradient from the output of activation '", name(a), "'"));
}

}  // namespace encore
