// Hooks on leaves' gradients: a function called once per backward pass when a leaf's gradient
// is final, after the last accumulation into its .grad in that pass (PyTorch's post-accumulate
// grad hook). A distributed optimizer starts the all-reduce of a gradient bucket from it while
// the rest of the backward pass runs; inside a trace the same code runs, so what the hook
// records lands in the graph at that point. Hooks run in the engine's deterministic order,
// under no-grad mode.
#pragma once

#include <cstdint>
#include <functional>

#include "ops/tensor.h"

namespace encore::autograd {

/// Calls `fn` whenever a backward pass has finished accumulating into `leaf`'s gradient;
/// returns an id for remove_grad_ready_hook. `leaf` must be a leaf tensor that requires grad.
uint64_t add_grad_ready_hook(const Tensor& leaf, std::function<void()> fn);
void remove_grad_ready_hook(uint64_t id);

namespace detail {
/// The engine's side: whether any hook exists, and the hooks of one leaf, run in the order added.
bool any_grad_ready_hooks();
void run_grad_ready_hooks(const TensorImpl* leaf);
bool has_grad_ready_hooks(const TensorImpl* leaf);
}  // namespace detail

}  // namespace encore::autograd
