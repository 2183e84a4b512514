// The recording state of one trace. While a Tracer is installed on a thread, the dispatcher
// appends nodes to its Graph instead of running kernels (the Tracer is the dispatcher's
// Recorder), tensors made by ops are symbolic (a buffer of this graph, no data), reading any
// value is an error (core's tracing flag), and every read and write of a `.grad` slot is
// logged (the Tracer is the thread's GradObserver): the gradient state the function saw is
// part of its cache key.
#pragma once

#include <unordered_map>

#include "graph/graph.h"
#include "ops/dispatch.h"

namespace encore::graph {

/// The persistent buffer that traced steps write `leaf`'s gradient into when its .grad was None,
/// so every Plan writes the tensor users read (null before the first such trace). It is kept on
/// the leaf, in the graph layer's slot of TensorImpl::extensions.
std::shared_ptr<TensorImpl> trace_grad(const TensorImpl& leaf);
void set_trace_grad(TensorImpl& leaf, std::shared_ptr<TensorImpl> buffer);

/// What a trace did to one leaf's `.grad` slot.
struct GradSlot {
  std::weak_ptr<TensorImpl> leaf;
  /// The slot's value before the trace touched it (restored when the trace fails).
  std::shared_ptr<TensorImpl> before;
  bool read_first = false;  // the function saw the caller's value: a guard of the cache entry
  bool written = false;     // the function assigned it: a replay re-applies the final value
};

class Tracer final : public Recorder, public GradObserver {
 public:
  /// Installs this tracer on the current thread until destruction.
  explicit Tracer(Graph& graph);
  ~Tracer() override;
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  /// A symbolic tensor standing for the traced function's argument `index`, with the caller's
  /// strides (its buffer spans the elements the view reaches).
  Tensor input(int index, const Tensor& arg, std::string label);
  /// The Value a tensor is in this graph; registers tensors with data as captured buffers.
  Value value(const Tensor& t, const char* op);
  /// Stops recording on this thread (ops run eagerly again); the destructor does it otherwise.
  void uninstall();

  Graph& graph() { return graph_; }
  const std::vector<GradSlot>& grad_slots() const { return grad_slots_; }
  /// Puts every logged `.grad` slot back to its value before the trace (after a failure).
  void restore_grads() const;
  /// Symbolic tensors of this trace still referenced by anyone: a tensor made inside the
  /// trace was kept outside it. Returns the first such buffer, or -1.
  int64_t escaped_buffer() const;

  // Recorder
  Tensor make_output(const TensorMeta& meta) override;
  void on_view(const Tensor& base) override;
  void record(const OpDef& def, const Attrs& attrs, std::span<const Tensor> in,
              std::span<const Tensor> out) override;
  // GradObserver
  void on_grad_read(const std::shared_ptr<TensorImpl>& leaf) override;
  void on_grad_write(const std::shared_ptr<TensorImpl>& leaf) override;

 private:
  GradSlot* slot(const std::shared_ptr<TensorImpl>& leaf);
  Tensor symbolic(uint32_t buffer, size_t nbytes, const Shape& shape, const Strides& strides,
                  DType dtype, Device device);

  Graph& graph_;
  uint64_t id_;
  bool installed_ = false;
  Recorder* previous_recorder_;
  GradObserver* previous_observer_;
  bool previous_tracing_;
  std::unordered_map<const Storage*, uint32_t> captured_;
  // Unnamed gradients the function read, by their parameter's name: "dense.kernel.grad".
  std::unordered_map<const Storage*, std::string> grad_labels_;
  std::unordered_map<const TensorImpl*, size_t> slot_index_;
  std::vector<GradSlot> grad_slots_;
  std::vector<std::weak_ptr<Storage>> symbolic_;  // every symbolic buffer made
  std::vector<const TensorImpl*> inputs_;         // the symbolic arguments, by position
};

}  // namespace encore::graph
