// The CUDA runtime's capture scope, driven with the runtime API directly: these tests link the
// CUDA plugin and libcudart themselves (the rest of the suite links libencore alone). Also the
// per-thread cuBLAS / cuDNN handles, warm-ups on the capture handles, and the message of a
// capture that failed (its text is checked without a GPU too).
#include <cuda_runtime_api.h>

#include <string>
#include <thread>

#include "core/cuda/check.h"
#include "core/cuda/handles.h"
#include "core/cuda/runtime.h"
#include "graph/device_graph.h"
#include "helpers.h"
#include "ops/creation.h"
#include "ops/dispatch.h"
#include "ops/reduce.h"
#include "ops/registry.h"

namespace encore {
namespace {

using test::kGpu;

// Work another thread queues while a capture is open runs at once on the compute stream and
// stays out of the graph.
TEST(CudaGraphCapture, OtherThreadsWorkStaysOutOfTheGraph) {
  REQUIRE_CUDA();
  const Tensor a = full({1000}, 2.0, DType::Float32, kGpu);
  double other = 0;
  std::string other_error;
  cudaStream_t others_stream = nullptr;
  cudaGraph_t graph = nullptr;
  {
    cuda::CaptureScope scope(kGpu.index);
    ASSERT_EQ(cuda::stream(kGpu.index), scope.stream());
    ASSERT_EQ(cudaStreamBeginCapture(scope.stream(), cudaStreamCaptureModeThreadLocal),
              cudaSuccess);
    std::thread([&] {
      try {
        others_stream = cuda::stream(kGpu.index);
        other = sum(a * 3.0).item();
      } catch (const std::exception& e) {
        other_error = e.what();
      }
    }).join();
    ASSERT_EQ(cudaStreamEndCapture(scope.stream(), &graph), cudaSuccess);
    EXPECT_NE(others_stream, scope.stream());
  }
  EXPECT_EQ(other_error, "");
  EXPECT_EQ(other, 6000.0);
  size_t nodes = 1;
  EXPECT_EQ(cudaGraphGetNodes(graph, nullptr, &nodes), cudaSuccess);
  EXPECT_EQ(nodes, 0u);
  cudaGraphDestroy(graph);
}

// A warm-up executes on the capture stream through the capture handles, ordered after the
// compute stream's queued work and before what is queued there next; allocating inside it is
// refused as in a capture.
TEST(CudaGraphCapture, WarmUpRunsOnTheCaptureHandlesJoinedToTheComputeStream) {
  REQUIRE_CUDA();
  const int d = kGpu.index;
  const cudaStream_t compute = cuda::stream(d);
  const cublasHandle_t own_cublas = cuda::cublas(d);
  const cudnnHandle_t own_cudnn = cuda::cudnn(d);
  cublasHandle_t capture_cublas = nullptr;
  cudnnHandle_t capture_cudnn = nullptr;
  {
    cuda::CaptureScope capture(d);
    capture_cublas = cuda::cublas(d);
    capture_cudnn = cuda::cudnn(d);
    EXPECT_TRUE(cuda::capturing());
  }
  EXPECT_NE(capture_cublas, own_cublas);
  EXPECT_NE(capture_cudnn, own_cudnn);
  Tensor a = full({1 << 20}, 1.0, DType::Float32, kGpu);
  a.add_(1.0);  // queued on the compute stream before the warm-up
  {
    cuda::CaptureScope warm(d, cuda::CaptureScope::Mode::WarmUp);
    EXPECT_FALSE(cuda::capturing());
    EXPECT_EQ(cuda::stream(d), warm.stream());
    EXPECT_NE(warm.stream(), compute);
    EXPECT_EQ(cuda::cublas(d), capture_cublas);
    EXPECT_EQ(cuda::cudnn(d), capture_cudnn);
    a.add_(a);  // on the capture stream: reads the 2s the compute stream wrote
    test::expect_throw_message<UnsupportedError>([&] { Tensor::empty({4}, DType::Float32, kGpu); },
                                                 "while warming up on the capture stream");
  }
  EXPECT_EQ(cuda::stream(d), compute);
  a.add_(1.0);  // on the compute stream again, after the warm-up
  EXPECT_EQ(sum(a).item(), 5.0 * (1 << 20));
}

// Each thread has its own cuBLAS and cuDNN handles; a thread that exits hands them on.
TEST(CudaRuntime, HandlesArePerThreadAndHandedOn) {
  REQUIRE_CUDA();
  const int d = kGpu.index;
  const cudnnHandle_t mine = cuda::cudnn(d);
  const cublasHandle_t mine_blas = cuda::cublas(d);
  EXPECT_EQ(cuda::cudnn(d), mine);
  cudnnHandle_t first = nullptr, second = nullptr;
  cublasHandle_t first_blas = nullptr;
  std::thread([&] {
    first = cuda::cudnn(d);
    first_blas = cuda::cublas(d);
  }).join();
  std::thread([&] { second = cuda::cudnn(d); }).join();
  EXPECT_NE(first, mine);
  EXPECT_NE(first_blas, mine_blas);
  EXPECT_EQ(second, first);  // the exited thread's handles went to the next thread
}

// The text that a failed capture's error ends with: the capture's status and the last CUDA
// error, by name (no GPU needed).
TEST(CudaGraphCapture, CaptureStateIsDescribedByName) {
  EXPECT_EQ(cuda::describe_capture(cudaStreamCaptureStatusActive, cudaSuccess),
            "capture status active, last CUDA error none");
  const std::string invalid =
      cuda::describe_capture(cudaStreamCaptureStatusInvalidated, cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(
      invalid.rfind(
          "capture status invalidated, last CUDA error cudaErrorStreamCaptureUnsupported (", 0),
      0u)
      << invalid;
}

// A step that synchronizes inside the capture (without checking the error, as library code
// may) invalidates it: the error names the op, the capture's status and the last CUDA error,
// and the runtime stays usable.
TEST(CudaGraphCapture, InvalidatedCaptureSaysWhatItSaw) {
  REQUIRE_CUDA();
  const Tensor x = full({16}, 2.0, DType::Float32, kGpu);
  Tensor y = Tensor::empty({16}, DType::Float32, kGpu);
  const OpDef& def = op("neg");
  const KernelFn synchronizing = [](const KernelCtx&) {
    (void)cudaStreamSynchronize(cuda::stream(0));
  };
  graph::Step step{&def, synchronizing, kGpu, {ref(x)}, {ref(y)}, {}, nullptr};
  graph::PlanTimes times;
  try {
    graph::graph_capture(DeviceType::CUDA)({step}, kGpu.index, times);
    ADD_FAILURE() << "a synchronization was captured";
  } catch (const BackendError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("[capture] neg cannot be captured into a CUDA Graph", 0), 0u) << what;
    EXPECT_NE(what.find("capture status invalidated, last CUDA error cudaError"), std::string::npos)
        << what;
  }
  test::expect_values(sum(x * 3.0), {96});
}

}  // namespace
}  // namespace encore
