// CUDA Graph capture and replay of a Plan (see graph/device_graph.h).
#include "graph/device_graph.h"

#include <cuda.h>
#include <cudaTypedefs.h>

#include "core/cuda/check.h"
#include "core/cuda/handles.h"
#include "core/cuda/runtime.h"
#include "core/ledger.h"

namespace encore::graph {

namespace {

// Ends a capture that went wrong, so that the stream is usable again and nothing leaks.
void abandon_capture(cudaStream_t stream) {
  cudaGraph_t partial = nullptr;
  if (cudaStreamEndCapture(stream, &partial) == cudaSuccess && partial) cudaGraphDestroy(partial);
  (void)cudaGetLastError();
}

// The capture's status and the thread's last CUDA error, read before the capture is abandoned
// (which clears the error), for the message of a capture that failed.
std::string capture_state(cudaStream_t stream) {
  const cudaError_t last = cudaPeekAtLastError();
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) != cudaSuccess)
    status = cudaStreamCaptureStatusInvalidated;
  return cuda::describe_capture(status, last);
}

bool capture_invalidated(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) != cudaSuccess)
    return true;  // the error stays for capture_state
  return status != cudaStreamCaptureStatusActive;
}

class CudaGraph final : public DeviceGraph {
 public:
  explicit CudaGraph(int device) : device_(device) {}
  ~CudaGraph() override;
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  /// One cudaGraphLaunch on the compute stream, counted as graph_launches in the ledger.
  void launch() override;
  std::vector<std::string> kernel_names() const override;

  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;

 private:
  int device_ = 0;
};

std::unique_ptr<DeviceGraph> capture(const std::vector<Step>& steps, int device, PlanTimes& times) {
  cuda::DeviceGuard guard(device);
  auto g = std::make_unique<CudaGraph>(device);
  cudaGraph_t graph = nullptr;
  {
    ScopedTimer timer(Counter::CaptureNs, "capture");
    // The steps are captured on the device's capture stream, which only this thread sees (other
    // threads' eager work stays on the compute stream and out of the graph; see CaptureScope).
    cuda::CaptureScope scope(device);
    const cudaStream_t stream = scope.stream();
    // Thread-local mode: another thread's unrelated CUDA calls cannot invalidate the capture.
    ENCORE_CUDA_CHECK("capture", cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    for (const Step& s : steps) {
      scope.set_op(s.op->name);
      // The error keeps its type (out-of-memory stays OutOfMemoryError) and gains the op and the
      // state the capture was left in.
      const auto failed = [&](const std::exception& e) {
        const std::string state = capture_state(stream);
        abandon_capture(stream);
        return detail::cat("[capture] ", s.op->name,
                           " failed while being captured into a CUDA Graph: ", e.what(), " (",
                           state, ")");
      };
      try {
        s.kernel(KernelCtx{s.in, s.out, s.attrs, s.state.get(), s.op->name});
      } catch (const OutOfMemoryError& e) {
        throw OutOfMemoryError(failed(e));
      } catch (const UnsupportedError& e) {
        throw UnsupportedError(failed(e));
      } catch (const std::exception& e) {
        throw BackendError(failed(e));
      }
      // An op that synchronizes, copies from pageable memory or uses the legacy default stream
      // invalidates the capture without an error of its own: find it here, where we still know
      // which op. (Allocations throw.)
      if (capture_invalidated(stream)) {
        const std::string state = capture_state(stream);
        abandon_capture(stream);
        throw BackendError(
            detail::cat("[capture] ", s.op->name,
                        " cannot be captured into a CUDA Graph (it synchronized, copied from "
                        "pageable host memory or used the legacy default stream): ",
                        state, "; the capture was abandoned"));
      }
    }
    const cudaError_t end = cudaStreamEndCapture(stream, &graph);
    if (end != cudaSuccess) {
      const std::string state = capture_state(stream);
      (void)cudaGetLastError();
      throw BackendError(detail::cat("[capture] ending the CUDA Graph capture failed: ",
                                     cuda::status_string(end), " (", state, ")"));
    }
    times.capture_ns = timer.stop();
  }
  g->graph_ = graph;
  {
    ScopedTimer timer(Counter::InstantiateNs, "instantiate");
    cudaGraphExec_t exec = nullptr;
    ENCORE_CUDA_CHECK("instantiate", cudaGraphInstantiate(&exec, graph, 0));
    g->exec_ = exec;
    // Upload now so the first replay does not pay for it.
    ENCORE_CUDA_CHECK("instantiate", cudaGraphUpload(exec, cuda::stream(device)));
    times.instantiate_ns = timer.stop();
  }
  return g;
}

CudaGraph::~CudaGraph() {
  // Destruction must not throw; at process exit the driver may already be gone.
  if (exec_) cudaGraphExecDestroy(exec_);
  if (graph_) cudaGraphDestroy(graph_);
  (void)cudaGetLastError();
}

namespace {

// The driver's names of kernel nodes: a library that links the CUDA runtime statically (NCCL
// does) launches kernels this process's runtime cannot name, but the driver can.
struct DriverNames {
  PFN_cuGraphKernelNodeGetParams_v12000 params = nullptr;
  PFN_cuFuncGetName_v12030 func_name = nullptr;
  PFN_cuKernelGetName_v12030 kernel_name = nullptr;

  DriverNames() {
    get("cuGraphKernelNodeGetParams", 12000, params);
    get("cuFuncGetName", 12030, func_name);
    get("cuKernelGetName", 12030, kernel_name);
  }
  template <class Fn> static void get(const char* symbol, unsigned version, Fn& fn) {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion(symbol, &p, version, cudaEnableDefault, &found) ==
            cudaSuccess &&
        found == cudaDriverEntryPointSuccess)
      fn = reinterpret_cast<Fn>(p);
    (void)cudaGetLastError();
  }

  // "?" when the driver is too old to name it.
  std::string name(cudaGraphNode_t node) const {
    CUDA_KERNEL_NODE_PARAMS p{};
    const char* name = nullptr;
    if (params && params(node, &p) == CUDA_SUCCESS) {
      if (p.func && func_name && func_name(&name, p.func) == CUDA_SUCCESS && name) return name;
      if (!p.func && p.kern && kernel_name && kernel_name(&name, p.kern) == CUDA_SUCCESS && name)
        return name;
    }
    return "?";
  }
};

}  // namespace

std::vector<std::string> CudaGraph::kernel_names() const {
  static const DriverNames driver;
  size_t count = 0;
  ENCORE_CUDA_CHECK("graph", cudaGraphGetNodes(graph_, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  ENCORE_CUDA_CHECK("graph", cudaGraphGetNodes(graph_, nodes.data(), &count));
  std::vector<std::string> names;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type{};
    ENCORE_CUDA_CHECK("graph", cudaGraphNodeGetType(node, &type));
    if (type == cudaGraphNodeTypeKernel) names.push_back(driver.name(node));
  }
  return names;
}

void CudaGraph::launch() {
  cuda::DeviceGuard guard(device_);
  const cudaStream_t stream = cuda::stream(device_);
  const cudaGraphExec_t exec = exec_;
  Ledger& ledger = Ledger::global();
  if (!ledger.profiling()) {
    ENCORE_CUDA_CHECK("replay", cudaGraphLaunch(exec, stream));
    ledger.add(Counter::GraphLaunches, 1);
    return;
  }
  // While profiling, the whole graph's device time counts as kernel time.
  const cuda::Event start = cuda::make_event(true), stop = cuda::make_event(true);
  ENCORE_CUDA_CHECK("replay", cudaEventRecord(start.get(), stream));
  ENCORE_CUDA_CHECK("replay", cudaGraphLaunch(exec, stream));
  ledger.add(Counter::GraphLaunches, 1);
  ENCORE_CUDA_CHECK("replay", cudaEventRecord(stop.get(), stream));
  ENCORE_CUDA_CHECK("replay", cudaEventSynchronize(stop.get()));
  float ms = 0;
  ENCORE_CUDA_CHECK("replay", cudaEventElapsedTime(&ms, start.get(), stop.get()));
  const auto ns = static_cast<int64_t>(ms * 1e6);
  ledger.add(Counter::KernelNs, ns);
  ledger.add(Counter::KernelsTimed, 1);
  ledger.record({"cuda graph", "kernel", now_ns() - ns, ns});
}

const bool kRegistered = register_graph_capture(DeviceType::CUDA, capture);

}  // namespace

}  // namespace encore::graph
