// The recording state of one trace. While a Tracer is current on a thread, the dispatcher
// appends nodes to its Graph instead of running kernels, and tensors made by ops are
// symbolic (a buffer of this graph, no data).
#pragma once

#include <unordered_map>

#include "graph/graph.h"

namespace encore::graph {

class Tracer {
 public:
  explicit Tracer(Graph& graph);
  ~Tracer();
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  /// The tracer recording on this thread, or null when ops run eagerly.
  static Tracer* current() { return current_; }

  /// A symbolic tensor standing for the traced function's argument `index`.
  Tensor input(int index, const Shape& shape, DType dtype, Device device, bool requires_grad,
               std::string label);
  /// A symbolic tensor backed by a new internal buffer.
  Tensor make_output(const TensorMeta& meta);
  void record(OpId op, const OpDef& def, const Attrs& attrs, std::span<const Tensor> in,
              std::span<const Tensor> out);
  /// The Value a tensor is in this graph; registers tensors with data as captured buffers.
  Value value(const Tensor& t, const char* op);

  Graph& graph() { return graph_; }

  /// Called when backward assigns a leaf's .grad during the trace; a replay re-applies the
  /// final assignment so the caller's parameters see their gradient buffers.
  void note_grad(const std::shared_ptr<TensorImpl>& leaf) { grad_leaves_.push_back(leaf); }
  const std::vector<std::weak_ptr<TensorImpl>>& grad_leaves() const { return grad_leaves_; }

 private:
  friend class PauseTrace;
  static thread_local Tracer* current_;
  Graph& graph_;
  uint64_t id_;
  Tracer* previous_;
  std::unordered_map<const Storage*, uint32_t> captured_;
  std::vector<std::weak_ptr<TensorImpl>> grad_leaves_;
};

/// Runs ops eagerly inside a trace, for state that must exist before the graph does:
/// optimizer slots, gradient buffers, generator state. Their creation is not recorded.
class PauseTrace {
 public:
  PauseTrace();
  ~PauseTrace();
  PauseTrace(const PauseTrace&) = delete;
  PauseTrace& operator=(const PauseTrace&) = delete;

 private:
  Tracer* paused_;
};

}  // namespace encore::graph
