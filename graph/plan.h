// A Plan is a traced graph compiled for replay: a flat list of steps, each a resolved kernel
// with bound buffer addresses and any per-shape state prepared ahead (oneDNN primitives,
// cuDNN algorithms and workspaces). The CPU replays the list; CUDA captures it once into a
// CUDA Graph and replays that with one launch.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "graph/graph.h"
#include "graph/memory_plan.h"

namespace encore::graph {

class DeviceGraph;

struct Step {
  const OpDef* op;
  KernelFn kernel;
  Device device;
  std::vector<TensorRef> in, out;
  Attrs attrs;
  std::shared_ptr<void> state;
};

struct PlanTimes {
  int64_t plan_ns = 0, capture_ns = 0, instantiate_ns = 0;
};

class Plan {
 public:
  /// Compiles `graph` (already optimized). Runs per-shape setup (autotuning) now, never
  /// during replay or capture.
  explicit Plan(Graph graph);
  ~Plan();
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;

  /// Runs one replay on the caller's tensor arguments (any strides; shapes, dtypes and devices
  /// as traced). In-place writes the function made to an argument reach the caller's tensor,
  /// as in eager mode; an argument sharing memory with another argument or a captured tensor
  /// where either is written is an error (a replay could not keep that aliasing exact). An
  /// argument that is a view of this Plan's own memory (an aliased output of the previous replay
  /// fed back, h = f(x, h)) is read from a copy, since the replay overwrites that memory; one the
  /// function writes in place is an error.
  void run(const std::vector<Tensor>& args);
  /// The traced function's results after run(): fresh copies, or views of the Plan's
  /// buffers that the next replay overwrites (`alias`).
  std::vector<Tensor> outputs(bool alias) const;

  const Graph& graph() const { return graph_; }
  /// The graph's text, each node followed by what its prepared state chose where the kernel
  /// says (e.g. "# brgconv:avx512_core" after a CPU convolution).
  std::string str() const;
  const MemoryPlan& memory() const { return memory_; }
  const std::vector<Step>& steps() const { return steps_; }
  const PlanTimes& times() const { return times_; }
  Device device() const { return device_; }
  bool captured() const { return device_graph_ != nullptr; }
  /// The captured graph (null on the CPU).
  const DeviceGraph* device_graph() const { return device_graph_.get(); }

 private:
  TensorRef resolve(const Value& v) const;
  std::shared_ptr<Storage> storage_of(uint32_t buffer) const;
  void check_aliasing(const std::vector<Tensor>& args) const;
  /// `args`, with those that live in this Plan's arenas replaced by copies (null: none does).
  std::optional<std::vector<Tensor>> copies_of_own_memory(const std::vector<Tensor>& args) const;
  void bind_inputs(const std::vector<Tensor>& args);
  void write_back(const std::vector<Tensor>& args) const;
  /// Where input `k` lives during a replay: the caller's tensor, a contiguous copy of it, or
  /// (CUDA) its slot in the arena.
  TensorRef input_ref(size_t k) const;

  Graph graph_;
  MemoryPlan memory_;
  Device device_;                                 // where the steps run (all on one device)
  std::vector<std::shared_ptr<Storage>> arenas_;  // one per memory_.arenas entry
  std::vector<Step> steps_;
  // Inputs bound by pointer (CPU): where each input's address is written in the steps.
  struct Site {
    TensorRef* ref;
    int64_t byte_offset;
  };
  std::vector<std::vector<Site>> input_sites_;
  std::vector<const void*> bound_;
  std::vector<Tensor> bound_inputs_;  // CPU: what each input is bound to (kept alive)
  std::vector<int> written_inputs_;
  // Sorted, for the aliasing check of arguments.
  std::vector<const Storage*> captured_storages_, written_captured_storages_;
  std::unique_ptr<DeviceGraph> device_graph_;
  PlanTimes times_;
};

/// A copy of `t` with its shape and strides (its storage spans what the view reaches): what a
/// Plan bound to `t`'s layout can read in its place.
Tensor copy_with_layout(const Tensor& t);

}  // namespace encore::graph
