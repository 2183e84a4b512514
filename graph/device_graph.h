// A Plan's steps captured once and replayed with one launch: on CUDA, a CUDA Graph. The capture
// belongs to the backend's plugin (graph/cuda/cuda_graph.cpp in libencore_cuda.so), which
// registers it when libencore loads the plugin (core/backend.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "graph/plan.h"

namespace encore::graph {

class DeviceGraph {
 public:
  virtual ~DeviceGraph() = default;
  /// One replay of the captured steps, queued on the device's compute stream (asynchronous).
  virtual void launch() = 0;
  /// The names of the kernels the captured graph launches, in the graph's node order, mangled as
  /// the driver names them ("?" where it cannot): what a test reads to see that a library's call,
  /// NCCL's all-reduce, was captured.
  virtual std::vector<std::string> kernel_names() const { return {}; }
};

/// Captures `steps` for `device` and instantiates the graph. CUDA: on the device's capture
/// stream (cuda::CaptureScope: other threads' work cannot land in the graph); a step that
/// breaks capture (allocates, synchronizes, copies to or from the host) ends it cleanly
/// (nothing leaked, the runtime usable) and the error names the op. Capture and instantiate
/// times go into `times` and the ledger.
using CaptureFn = std::unique_ptr<DeviceGraph> (*)(const std::vector<Step>& steps, int device,
                                                   PlanTimes& times);

/// Called by a backend plugin's static initializer; returns true.
bool register_graph_capture(DeviceType type, CaptureFn capture);
/// The capture of `type`'s backend (loading its plugin); UnsupportedError when it has none.
CaptureFn graph_capture(DeviceType type);

}  // namespace encore::graph
