// Collectives as ops (ops/defs/collective.cpp): the public functions of encore::dist that move
// tensors between the ranks of the world (core/dist.h). Each is an op with an external effect:
// it runs exactly once per call, eager or traced, on every rank, and a traced step replays it
// as a node of its Plan (captured into the CUDA Graph on the GPU). In a group of one every
// collective is the identity.
#pragma once

#include <string>

#include "core/dist.h"
#include "core/error.h"
#include "ops/tensor.h"

namespace encore {

/// The attributes of the collective ops.
struct CollectiveAttrs {
  dist::ReduceOp op = dist::ReduceOp::Sum;
  int root = 0;
  std::string str() const { return detail::cat("op=", dist::name(op), ", root=", root); }
  bool operator==(const CollectiveAttrs&) const = default;
};

namespace dist {

/// The elementwise sum, mean or max of `x` over the ranks, on every rank. Differentiable: the
/// gradient is the all-reduce of the incoming gradient (sum, mean; max: the summed gradient
/// where x holds the maximum).
Tensor all_reduce(const Tensor& x, ReduceOp op = ReduceOp::Sum);
Tensor all_reduce(const Tensor& x, const std::string& op);
/// `root`'s x on every rank (same shape and dtype everywhere). Not differentiable.
Tensor broadcast(const Tensor& x, int root = 0);
/// The ranks' x concatenated along axis 0, in rank order (a scalar gives (size,)).
/// Differentiable: each rank gets its rows of the summed gradient.
Tensor all_gather(const Tensor& x);

/// The overlapped all-reduce a distributed optimizer runs over a gradient bucket, in place:
/// start_ returns at once while the engine reduces `x` (on its thread or stream); wait_ blocks
/// until it is done. Nothing may read or write `x` in between, and it must stay alive until the
/// wait (pass the same tensor to both). Both are graph nodes, ordered by their writes to `x`.
void all_reduce_start_(const Tensor& x, ReduceOp op);
void all_reduce_wait_(const Tensor& x);

}  // namespace dist
}  // namespace encore
