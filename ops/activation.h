// Keras activations by name: what Dense, Conv1D and the recurrent layers apply. One table: each
// activation is a struct below (its name, whether it is elementwise, its value and derivative
// for the fused kernels on both backends, its gradient from the output where it has one, and the
// op that applies it to a tensor), and visit_activation turns the enum into that struct. Every
// place that handles activations derives from it; a new activation is a new struct and a case
// of visit_activation (the compiler lists every place that needs its members).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/host_device.h"
#include "ops/functors.h"

namespace encore {

class Tensor;

enum class Activation : uint8_t { Linear, Tanh, Sigmoid, Relu, HardSigmoid, Gelu, Softmax };
inline constexpr int kNumActivations =
    static_cast<int>(Activation::Softmax) + 1;  // Softmax is last

/// The form in which a math library (oneDNN's eltwise post-ops) computes an activation where it
/// agrees with ours to a few ulp, NaN included; None where it has no such form.
enum class LibraryForm : uint8_t { None, Tanh, Logistic };

namespace act {

// Members of an activation:
//   name, elementwise (false: it normalizes a whole axis, and the fused recurrent cells reject it)
//   operator()(x)      its value, elementwise (the fused cells and epilogues)
//   grad(x, y)         its derivative at x, given y = operator()(x)
//   grad_from_output   whether output_grad(gy, y) = gy * derivative exists as a function of the
//                      output alone: such an activation rides in a fused op's epilogue
//                      (dense, conv1d_fused) and has an activation_grad kernel
//   library            its LibraryForm: a fused op with a library primitive applies it as the
//                      library's post-op; a fusable activation without one runs as our pass
//   apply(x)           the op that applies it to a tensor (ops/defs/elementwise.cpp)
struct Linear {
  static constexpr Activation id = Activation::Linear;
  static constexpr LibraryForm library = LibraryForm::None;
  static constexpr std::string_view name = "linear";
  static constexpr bool elementwise = true, grad_from_output = true;
  template <class T> ENCORE_HD T operator()(T x) const { return x; }
  template <class T> ENCORE_HD T grad(T, T) const { return T(1); }
  template <class T> ENCORE_HD T output_grad(T gy, T) const { return gy; }
  static Tensor apply(const Tensor& x);
};
struct Tanh {
  static constexpr Activation id = Activation::Tanh;
  static constexpr LibraryForm library = LibraryForm::Tanh;
  static constexpr std::string_view name = "tanh";
  static constexpr bool elementwise = true, grad_from_output = true;
  template <class T> ENCORE_HD T operator()(T x) const { return fn::m_tanh(x); }
  template <class T> ENCORE_HD T grad(T, T y) const { return T(1) - y * y; }
  template <class T> ENCORE_HD T output_grad(T gy, T y) const { return gy * (T(1) - y * y); }
  static Tensor apply(const Tensor& x);
};
struct Sigmoid {
  static constexpr Activation id = Activation::Sigmoid;
  static constexpr LibraryForm library = LibraryForm::Logistic;
  static constexpr std::string_view name = "sigmoid";
  static constexpr bool elementwise = true, grad_from_output = true;
  template <class T> ENCORE_HD T operator()(T x) const { return fn::m_sigmoid(x); }
  template <class T> ENCORE_HD T grad(T, T y) const { return y * (T(1) - y); }
  template <class T> ENCORE_HD T output_grad(T gy, T y) const { return gy * (y * (T(1) - y)); }
  static Tensor apply(const Tensor& x);
};
// The masks are selects, not products of a bool: GCC vectorizes those. A mask of 0 still makes a
// NaN or infinite gy NaN, as the formula written with ops did.
struct Relu {
  static constexpr Activation id = Activation::Relu;
  // oneDNN's relu is a max instruction, which returns its other operand for a NaN: relu(NaN)
  // would come out 0 where ours gives NaN, hiding a diverged layer.
  static constexpr LibraryForm library = LibraryForm::None;
  static constexpr std::string_view name = "relu";
  static constexpr bool elementwise = true, grad_from_output = true;
  template <class T> ENCORE_HD T operator()(T x) const { return fn::m_max(x, T(0)); }
  template <class T> ENCORE_HD T grad(T x, T) const { return x > T(0) ? T(1) : T(0); }
  // relu's input has the output's sign, so this takes either.
  template <class T> ENCORE_HD T output_grad(T gy, T y) const { return y > T(0) ? gy : gy * T(0); }
  static Tensor apply(const Tensor& x);
};
struct HardSigmoid {
  static constexpr Activation id = Activation::HardSigmoid;
  // oneDNN's clip, likewise: 0 for a NaN.
  static constexpr LibraryForm library = LibraryForm::None;
  static constexpr std::string_view name = "hard_sigmoid";
  static constexpr bool elementwise = true, grad_from_output = true;
  template <class T> ENCORE_HD T operator()(T x) const { return fn::m_hard_sigmoid(x); }
  template <class T> ENCORE_HD T grad(T x, T) const {
    return (x > T(-2.5) && x < T(2.5)) ? T(0.2) : T(0);
  }
  template <class T> ENCORE_HD T output_grad(T gy, T y) const {
    return y > T(0) && y < T(1) ? gy * T(0.2) : gy * T(0);
  }
  static Tensor apply(const Tensor& x);
};
// Exact, as Keras' default (encore.gelu(x, approximate=True) is the tanh form).
struct Gelu {
  static constexpr Activation id = Activation::Gelu;
  static constexpr LibraryForm library = LibraryForm::None;
  static constexpr std::string_view name = "gelu";
  static constexpr bool elementwise = true, grad_from_output = false;
  template <class T> ENCORE_HD T operator()(T x) const { return fn::m_gelu(x); }
  template <class T> ENCORE_HD T grad(T x, T) const { return fn::m_gelu_grad(x); }
  static Tensor apply(const Tensor& x);
};
// Over the last axis. Not elementwise: its element functions are the identity, never called by a
// kernel (the layers and cells that take an activation reject it where they would be).
struct Softmax {
  static constexpr Activation id = Activation::Softmax;
  static constexpr LibraryForm library = LibraryForm::None;
  static constexpr std::string_view name = "softmax";
  static constexpr bool elementwise = false, grad_from_output = false;
  template <class T> ENCORE_HD T operator()(T x) const { return x; }
  template <class T> ENCORE_HD T grad(T, T) const { return T(1); }
  static Tensor apply(const Tensor& x);
};

}  // namespace act

/// Calls `f` with the struct of activation `a` (act::Relu{}, ...): the choice is made once, so a
/// loop inside `f` is specialized for the activation and vectorizes.
template <class F> ENCORE_HD constexpr decltype(auto) visit_activation(Activation a, F&& f) {
  switch (a) {
    case Activation::Linear:
      return f(act::Linear{});
    case Activation::Tanh:
      return f(act::Tanh{});
    case Activation::Sigmoid:
      return f(act::Sigmoid{});
    case Activation::Relu:
      return f(act::Relu{});
    case Activation::HardSigmoid:
      return f(act::HardSigmoid{});
    case Activation::Gelu:
      return f(act::Gelu{});
    case Activation::Softmax:
      break;
  }
  return f(act::Softmax{});
}

std::string_view name(Activation a);
/// "linear" (also "" and "none"), "tanh", "sigmoid", "relu", "hard_sigmoid", "gelu" (exact, as
/// Keras' default), "softmax" (over the last axis); ValueError otherwise.
Activation parse_activation(const std::string& s);
/// A ValueError naming `op` for an activation that is not elementwise (softmax needs a whole
/// axis): the fused recurrent cells apply activations one element at a time.
void require_elementwise(Activation a, const char* op);
/// Whether a fused op (dense, conv1d_fused) can apply `a` in its epilogue: its backward takes the
/// activation's derivative from the output.
constexpr bool fusable_activation(Activation a) {
  return visit_activation(a, [](auto act) { return act.grad_from_output; });
}

namespace fn {
/// The activation's value, and its derivative from x and its value y: the fused recurrent cells.
template <class T> ENCORE_HD T activate(Activation a, T x) {
  return visit_activation(a, [&](auto act) { return act(x); });
}
template <class T> ENCORE_HD T activate_grad(Activation a, T x, T y) {
  return visit_activation(a, [&](auto act) { return act.grad(x, y); });
}
}  // namespace fn

}  // namespace encore
