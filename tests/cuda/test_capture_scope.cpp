// The CUDA runtime's capture scope, driven with the runtime API directly: these tests link the
// CUDA plugin and libcudart themselves (the rest of the suite links libencore alone).
#include <cuda_runtime_api.h>

#include <string>
#include <thread>

#include "core/cuda/runtime.h"
#include "helpers.h"
#include "ops/creation.h"
#include "ops/reduce.h"

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
    ASSERT_EQ(cudaStreamBeginCapture(scope.stream(), cudaStreamCaptureModeThreadLocal), cudaSuccess);
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

}  // namespace
}  // namespace encore
