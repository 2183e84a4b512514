// CUDA Graph capture of a Plan's steps and their replay with one launch (CUDA builds only;
// implemented in graph/cuda/cuda_graph.cpp).
#pragma once

#include <memory>
#include <vector>

#include "graph/plan.h"

namespace encore::graph {

class CudaGraph {
 public:
  /// Captures the steps on the device's capture stream (cuda::CaptureScope: other threads'
  /// work cannot land in the graph) and instantiates the graph. A step that breaks capture
  /// (allocates, synchronizes, copies to or from the host) ends it cleanly (nothing leaked,
  /// the runtime usable) and the error names the op. Capture and instantiate times go into
  /// `times` and the ledger.
  static std::unique_ptr<CudaGraph> capture(const std::vector<Step>& steps, int device, PlanTimes& times);
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  /// One cudaGraphLaunch on the compute stream (asynchronous).
  void launch();

 private:
  CudaGraph() = default;
  void* graph_ = nullptr;  // cudaGraph_t
  void* exec_ = nullptr;   // cudaGraphExec_t
  int device_ = 0;
};

}  // namespace encore::graph
