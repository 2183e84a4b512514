// Data-parallel training (core/dist.h for the world, ops/collective.h for the collectives): every
// rank holds the whole model and trains on its own slice of each batch; the gradients are
// averaged over the ranks before each update, so all ranks take the same step and the result
// is that of one process on the whole batch.
//
//   dist::init();
//   dist::broadcast_parameters(model);                   // rank 0's initial weights everywhere
//   auto opt = dist::DistributedOptimizer(std::make_shared<nn::Adam>(model.parameters()));
//   ... loss.backward(); opt->step();                      // eager or inside a traced step
//
// The gradients travel in buckets: a bucket holds parameters of one dtype and device, filled in
// reverse order of the parameters (the order the backward pass finishes them) up to
// bucket_bytes. As soon as a bucket's last gradient is final (autograd/hooks.h), its gradients
// are packed into one fused buffer and its all-reduce starts (all_reduce_start_: the engine's
// thread on the CPU, its stream on the GPU) while the backward pass goes on; step() updates
// bucket by bucket, each update waiting only for its own bucket (Optimizer::set_update_parts).
// Inside a traced step the packing, the all-reduce and the wait are nodes of the graph at
// exactly those places, so replays overlap the same way.
#pragma once

#include <memory>
#include <vector>

#include "nn/module.h"
#include "nn/optim.h"

namespace encore::dist {

struct DistributedOptions {
  /// The most bytes of gradients one bucket holds; 0: one bucket per parameter. 1 MiB: the medium
  /// Conv1D model (12 MB of gradients) then has 7 buckets and hides 75-85% of its all-reduce
  /// behind the backward pass on 2 ranks, where DDP's 25 MiB makes it one bucket that hides
  /// nothing (docs/DISTRIBUTED.md); a model under 1 MiB (the tiny Dense one) is one bucket.
  int64_t bucket_bytes = int64_t{1} << 20;
  /// Start each bucket's all-reduce in the backward pass as soon as its gradients are final;
  /// false: start them all in step() (nothing overlaps; for measuring what overlap hides).
  bool overlap = true;
};

/// Makes `optimizer` data-parallel and returns it: its step() first averages the gradients of
/// its parameters over the ranks, in buckets (see above). In a group of one every all-reduce is
/// the identity. Call once per optimizer; the parameters must have the same shapes on every
/// rank (broadcast_parameters makes their values equal too).
std::shared_ptr<nn::Optimizer> DistributedOptimizer(std::shared_ptr<nn::Optimizer> optimizer,
                                                    DistributedOptions options = {});

/// The buckets of a distributed optimizer: parameter indices per bucket, in launch order.
std::vector<std::vector<size_t>> buckets(const nn::Optimizer& optimizer);

/// Copies `root`'s values of the tensors (parameters, buffers) into every rank's, in place.
void broadcast_parameters(const std::vector<Tensor>& tensors, int root = 0);
/// Every parameter and buffer of `module` (build it first).
void broadcast_parameters(const nn::Module& module, int root = 0);

}  // namespace encore::dist
