// Keras activations by name: what Dense, Conv1D and the recurrent layers apply, and what the
// fused recurrent-cell kernels understand (ops/functors.h computes them).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace encore {

enum class Activation : uint8_t { Linear, Tanh, Sigmoid, Relu, HardSigmoid };
std::string_view name(Activation a);
/// "linear" (also "" and "none"), "tanh", "sigmoid", "relu", "hard_sigmoid"; ValueError otherwise.
Activation parse_activation(const std::string& s);

}  // namespace encore
