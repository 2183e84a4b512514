// Collectives on CUDA tensors through NCCL (core/nccl/engine.cpp). They need a GPU and a world
// with NCCL: launched (mpirun), or a world of one on NCCL alone (ENCORE_DIST=nccl), which is how
// tests/gpu/run.sh runs them on a machine without MPI. Elsewhere they skip, saying why.
#include <gtest/gtest.h>

#include <algorithm>

#include "../cpp/helpers.h"
#include "core/dist.h"
#include "graph/device_graph.h"
#include "graph/trace.h"
#include "nn/distributed.h"
#include "nn/layers.h"
#include "ops/collective.h"
#include "ops/ops.h"

namespace encore {
namespace {

// Where the GPU check expects a GPU (ENCORE_EXPECT_CUDA=1), a world without NCCL fails.
#define REQUIRE_NCCL()                                                                  \
  REQUIRE_CUDA();                                                                       \
  if (!dist::launched() && dist::world().backend != "nccl") {                           \
    if (test::cuda_expected()) FAIL() << "ENCORE_EXPECT_CUDA=1 but no world with NCCL"; \
    GTEST_SKIP() << "needs a world with NCCL: mpirun, or ENCORE_DIST=nccl";             \
  }

Device gpu() { return Device::cuda(dist::rank() % cuda_device_count()); }

// NCCL's mean of floats scales each rank's value by 1/N before it sums (its PreMulSum), where the
// CPU engine divides the sum: the two agree bitwise when N is a power of two, else to rounding.
void expect_mean(const Tensor& expected, const Tensor& got) {
  const int n = dist::size();
  if ((n & (n - 1)) == 0)
    EXPECT_TRUE(test::bitwise_equal(expected, got));
  else
    test::expect_close(expected, got, 1e-6, "NCCL's mean");
}

TEST(Nccl, CollectivesOnTheGpuMatchTheCpu) {
  REQUIRE_NCCL();
  const Tensor x = arange(0, 8, 1, DType::Float32) + (dist::rank() + 1.0);
  for (const char* op : {"sum", "max"})
    EXPECT_TRUE(test::bitwise_equal(dist::all_reduce(x.to(gpu()), op).to(Device::cpu()),
                                    dist::all_reduce(x, op)))
        << op;
  expect_mean(dist::all_reduce(x, "mean"), dist::all_reduce(x.to(gpu()), "mean").to(Device::cpu()));
  EXPECT_TRUE(
      test::bitwise_equal(dist::all_gather(x.to(gpu())).to(Device::cpu()), dist::all_gather(x)));
  EXPECT_TRUE(test::bitwise_equal(dist::broadcast(x.to(gpu()), 0).to(Device::cpu()),
                                  dist::broadcast(x, 0)));
}

// NCCL runs its own kernels in the graph: ncclDevKernel_* between ranks; on one rank a mean is
// its oneRankReduce kernel (a sum there is a plain copy, or nothing in place, which no node can
// show), so the step takes the mean.
bool is_nccl_kernel(const std::string& name) {
  return name.find("nccl") != std::string::npos || name.find("oneRankReduce") != std::string::npos;
}

TEST(Nccl, CapturedStepHoldsTheNcclCall) {
  REQUIRE_NCCL();
  const Tensor w = full({64}, 0.5, DType::Float32, gpu());
  auto step = trace([&](const Tensor& x) { return dist::all_reduce(x * w, "mean"); });
  const Tensor x = full({64}, dist::rank() + 1.0, DType::Float32, gpu());
  const Tensor eager = dist::all_reduce(x * w, "mean").to(Device::cpu());
  // Against the CPU: the mean of (r + 1) / 2 over the ranks.
  expect_mean(full({64}, (dist::size() + 1) / 4.0, DType::Float32), eager);
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(test::bitwise_equal(step(x).to(Device::cpu()), eager)) << "call " << i;
  const graph::Plan* plan = step.function().last_plan();
  ASSERT_TRUE(plan && plan->captured());
  const std::vector<std::string> names = plan->device_graph()->kernel_names();
  std::string all;
  for (const std::string& name : names) all += "\n  " + name;
  EXPECT_TRUE(std::any_of(names.begin(), names.end(), is_nccl_kernel))
      << "no NCCL kernel among the captured graph's " << names.size() << " kernels:" << all;
}

TEST(Nccl, DistributedOptimizerTracedOnTheGpuEqualsEager) {
  REQUIRE_NCCL();
  auto run = [&](bool traced) {
    manual_seed(1);
    nn::Sequential model;
    model.add<nn::Dense>(8, nn::DenseOptions{.activation = "relu"});
    model.add<nn::Dense>(1);
    model.build({4, 6});
    model.to(gpu());
    auto opt = dist::DistributedOptimizer(std::make_shared<nn::Adam>(model.parameters()),
                                          {.bucket_bytes = 64});
    const Tensor x = test::rand32({4, 6}).to(gpu()), y = test::rand32({4, 1}, 2).to(gpu());
    auto body = [&](const Tensor& xb, const Tensor& yb) {
      opt->zero_grad();
      const Tensor loss = nn::mean_squared_error(yb, model(xb));
      loss.backward();
      opt->step();
      return loss;
    };
    auto step = trace(body);
    for (int i = 0; i < 4; ++i) traced ? step(x, y) : body(x, y);
    std::vector<Tensor> out;
    for (const Tensor& p : model.parameters()) out.push_back(p.to(Device::cpu()));
    return out;
  };
  const std::vector<Tensor> eager = run(false), traced = run(true);
  for (size_t i = 0; i < eager.size(); ++i)
    EXPECT_TRUE(test::bitwise_equal(eager[i], traced[i])) << i;
}

}  // namespace
}  // namespace encore
