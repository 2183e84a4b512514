// The tape: each differentiable op call that involved a tensor requiring grad leaves a Node
// holding what its backward formula needs and where each input's gradient goes.
#pragma once

#include <memory>
#include <vector>

#include "ops/registry.h"

namespace encore::autograd {

struct Node;

/// Where the gradient of one input goes: into another node's output, or into a leaf.
struct Edge {
  std::shared_ptr<Node> node;
  uint32_t output_nr = 0;
  std::shared_ptr<TensorImpl> leaf;
  bool valid() const { return node || leaf; }
};

struct Node {
  const OpDef* op;
  Attrs attrs;
  uint64_t seq;  // creation order; the engine runs later nodes first
  std::vector<Edge> next;
  std::vector<TensorMeta> input_metas;
  std::vector<Tensor> saved_inputs, saved_outputs;
  std::vector<uint32_t> saved_versions;  // storage versions of saved tensors when saved
  int num_outputs = 1;
  bool released = false;

  /// Frees the nodes only this one keeps alive without recursing into each: a chain of 200k
  /// ops (a loss summed over steps without .item()) overflowed the stack when freed.
  ~Node();
};

/// Called by the dispatcher after an op produced `out` from `in`.
void record(const OpDef& def, const Attrs& attrs, std::span<const Tensor> in,
            std::span<Tensor> out);

/// Runs reverse mode from `root` with seed `grad`, accumulating into leaves' `.grad`.
void backward(const Tensor& root, const Tensor& grad);

}  // namespace encore::autograd
