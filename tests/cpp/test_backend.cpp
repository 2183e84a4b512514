// The CUDA backend is a plugin libencore loads at run time (core/backend.h): without it (a
// CPU-only build, no plugin, no CUDA libraries, no driver, no GPU) everything CPU works and
// each way into CUDA says why it is not available. tests/plugin/check_plugin.py runs this suite
// with the CUDA libraries hidden from the loader.
#include <gtest/gtest.h>

#include <string>

#include "core/backend.h"
#include "ops/registry.h"
#include "ops/tensor.h"

namespace encore {
namespace {

TEST(Backend, UnavailableReasonIsEmptyExactlyWhenCudaIsAvailable) {
  const std::string reason = cuda::unavailable_reason();
  EXPECT_EQ(cuda::is_available(), reason.empty()) << reason;
  EXPECT_EQ(cuda_built(), backend(DeviceType::CUDA) != nullptr);
  EXPECT_EQ(backend_status(DeviceType::CUDA).empty(), cuda_built());
  if (!cuda_built()) {
    EXPECT_EQ(reason, backend_status(DeviceType::CUDA));
  } else if (!cuda::is_available()) {
    EXPECT_TRUE(reason == "no CUDA driver found" || reason.rfind("no CUDA device (", 0) == 0)
        << reason;
  }
}

TEST(Backend, CudaTensorWithoutTheBackendIsADeviceErrorSayingWhy) {
  if (cuda_built()) GTEST_SKIP() << "the CUDA backend is loaded";
  try {
    Tensor::empty({4}, DType::Float32, Device::cuda(0));
    ADD_FAILURE() << "a CUDA tensor without the CUDA backend";
  } catch (const DeviceError& e) {
    EXPECT_EQ(std::string(e.what()),
              "[alloc] device cuda:0 is not available: " + cuda::unavailable_reason());
  }
}

TEST(Backend, CudaOnlyOpWithoutTheBackendSaysWhy) {
  if (cuda_built()) GTEST_SKIP() << "the CUDA backend is loaded";
  try {
    op("cudnn_lstm");
    ADD_FAILURE() << "cudnn_lstm without the CUDA backend";
  } catch (const UnsupportedError& e) {
    EXPECT_EQ(std::string(e.what()),
              "[cudnn_lstm] is not available in this build (it needs the CUDA backend: " +
                  cuda::unavailable_reason() + ")");
  }
}

TEST(Backend, CpuBackendIsBuiltIn) {
  EXPECT_EQ(backend(DeviceType::CPU), nullptr);  // the CPU runs inside libencore, no plugin
  EXPECT_NE(find_op("matmul"), nullptr);
}

}  // namespace
}  // namespace encore
