// Keras activations by name: what Dense, Conv1D and the recurrent layers apply, and what the
// fused recurrent-cell kernels understand (ops/functors.h computes them).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace encore {

enum class Activation : uint8_t { Linear, Tanh, Sigmoid, Relu, HardSigmoid, Gelu, Softmax };
std::string_view name(Activation a);
/// "linear" (also "" and "none"), "tanh", "sigmoid", "relu", "hard_sigmoid", "gelu" (exact, as
/// Keras' default), "softmax" (over the last axis); ValueError otherwise.
Activation parse_activation(const std::string& s);
/// A ValueError naming `op` for softmax, which needs a whole axis: the fused recurrent cells
/// apply activations one element at a time.
void require_elementwise(Activation a, const char* op);
/// Whether conv1d_fused can apply `a`: its backward takes the activation's derivative from the
/// output, which gelu's and softmax's are not a function of.
constexpr bool fusable_activation(Activation a) {
  return a != Activation::Gelu && a != Activation::Softmax;
}

}  // namespace encore
