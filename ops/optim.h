// The fused optimizer updates (ops/defs/optim.cpp): one op per step over all parameters of a
// device, called by the optimizers of nn/optim.h.
#pragma once

#include <span>

#include "ops/optim_math.h"
#include "ops/tensor.h"

namespace encore {

/// zero_grad of an optimizer or a module: each gradient set to None (the old one never read, so a
/// traced step that starts with it does not depend on whether a gradient existed), or zeroed in
/// place.
void zero_grads(std::span<Tensor> params, bool set_to_none);

/// params -= lr * (grad + weight_decay * param), with (Nesterov) momentum when
/// options.momentum > 0 (`momentum` holds one buffer per parameter then; empty otherwise).
/// `lr` is a float64 scalar tensor on the parameters' device.
void sgd_update(std::span<const Tensor> params, std::span<const Tensor> momentum,
                std::span<const Tensor> grads, const Tensor& lr, const SgdAttrs& options);
/// Adam with bias correction for update number `step` (an int64 scalar tensor, already
/// incremented for this update); AdamW and Keras' epsilon placement by the options' flags.
void adam_update(std::span<const Tensor> params, std::span<const Tensor> m,
                 std::span<const Tensor> v, std::span<const Tensor> grads, const Tensor& step,
                 const Tensor& lr, const AdamAttrs& options);
/// RMSprop as Keras writes it (eps inside the square root). `momentum` holds one buffer per
/// parameter when options.momentum > 0 and `mean_grads` one when options.centered; each is
/// empty otherwise.
void rmsprop_update(std::span<const Tensor> params, std::span<const Tensor> v,
                    std::span<const Tensor> momentum, std::span<const Tensor> mean_grads,
                    std::span<const Tensor> grads, const Tensor& lr, const RmspropAttrs& options);

}  // namespace encore
