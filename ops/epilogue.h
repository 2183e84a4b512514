// The bias-and-activation epilogue of the fused ops (conv1d_fused, dense): its attributes, the
// CPU pass over the output, and its derivative. Only activations whose derivative is a function
// of the output ride in an epilogue (fusable_activation): the backward then needs no extra
// saved tensor.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "ops/activation.h"
#include "ops/functors.h"
#include "ops/tensor.h"

namespace encore {

struct ActivationAttrs {
  Activation activation = Activation::Linear;
  std::string str() const { return detail::cat("activation=", name(activation)); }
  bool operator==(const ActivationAttrs&) const = default;
};

/// y = activation(y + b) over (rows, cols), in place; rows lie `ld` elements apart (default
/// cols), and a null b adds nothing. The activation is chosen once, outside the loop: a switch
/// per element costs an indirect jump, and relu's data-dependent branch, per entry (13 us of
/// the tiny Dense model's 23 us step), where the chosen loop vectorizes.
template <class T>
void bias_activation(T* y, const std::type_identity_t<T>* b, int64_t rows, int64_t cols,
                     Activation a, int64_t ld = -1) {
  if (ld < 0) ld = cols;
  const auto apply = [&](auto act) {
    for (int64_t i = 0; i < rows; ++i, y += ld) {
      if (b)
        for (int64_t f = 0; f < cols; ++f) y[f] = act(y[f] + b[f]);
      else
        for (int64_t f = 0; f < cols; ++f) y[f] = act(y[f]);
    }
  };
  visit_activation(a, apply);
}

/// The gradient before the activation, gy * activation'(.), from the activation's output y:
/// the activation_grad op, one kernel (gy itself for linear). Backward formulas call it; it has
/// no gradient of its own.
Tensor activation_backward(Activation a, const Tensor& gy, const Tensor& y);

}  // namespace encore
