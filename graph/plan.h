// A Plan is a traced graph compiled for replay: a flat list of steps, each a resolved kernel
// with bound buffer addresses and any per-shape state prepared ahead (oneDNN primitives,
// cuDNN algorithms and workspaces). The CPU replays the list; CUDA captures it once into a
// CUDA Graph and replays that with one launch.
#pragma once

#include <memory>
#include <vector>

#include "graph/graph.h"
#include "graph/memory_plan.h"

namespace encore::graph {

class CudaGraph;

struct Step {
  OpId op;
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

  /// Runs one replay on `inputs` (contiguous, matching the traced signature).
  void run(const std::vector<Tensor>& inputs);
  /// The traced function's results after run(): fresh copies, or views of the Plan's
  /// buffers that the next replay overwrites (`alias`).
  std::vector<Tensor> outputs(bool alias) const;

  const Graph& graph() const { return graph_; }
  const MemoryPlan& memory() const { return memory_; }
  const std::vector<Step>& steps() const { return steps_; }
  const PlanTimes& times() const { return times_; }
  Device device() const { return device_; }
  bool captured() const { return cuda_graph_ != nullptr; }

 private:
  TensorRef resolve(const Value& v) const;
  std::shared_ptr<Storage> storage_of(uint32_t buffer) const;
  void bind_inputs(const std::vector<Tensor>& inputs);

  Graph graph_;
  MemoryPlan memory_;
  Device device_;  // where the steps run (all on one device)
  std::vector<std::shared_ptr<Storage>> arenas_;  // one per memory_.arenas entry
  std::vector<Step> steps_;
  // Inputs bound by pointer (CPU): where each input's address is written in the steps.
  struct Site {
    TensorRef* ref;
    int64_t byte_offset;
  };
  std::vector<std::vector<Site>> input_sites_;
  std::vector<const void*> bound_;
  std::vector<Tensor> bound_inputs_;  // kept alive while bound
  std::unique_ptr<CudaGraph> cuda_graph_;
  PlanTimes times_;
};

}  // namespace encore::graph
