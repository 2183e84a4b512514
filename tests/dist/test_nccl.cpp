// Collectives on CUDA tensors through NCCL (core/nccl/engine.cpp). They need a GPU and a launched
// world, since NCCL bootstraps over MPI: tests/gpu/run.sh runs them with mpirun -np 1 (one GPU,
// one rank); elsewhere they skip, saying why.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>

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

#define REQUIRE_NCCL()                                                             \
  if (!cuda_available()) GTEST_SKIP() << "no GPU: " << cuda::unavailable_reason(); \
  if (!dist::launched())                                                           \
  GTEST_SKIP() << "needs a launched world (mpirun -np 1): NCCL bootstraps over MPI"

Device gpu() { return Device::cuda(dist::rank() % cuda_device_count()); }

TEST(Nccl, CollectivesOnTheGpuMatchTheCpu) {
  REQUIRE_NCCL();
  const Tensor x = arange(0, 8, 1, DType::Float32) + (dist::rank() + 1.0);
  for (const char* op : {"sum", "mean", "max"})
    EXPECT_TRUE(test::bitwise_equal(dist::all_reduce(x.to(gpu()), op).to(Device::cpu()),
                                    dist::all_reduce(x, op)))
        << op;
  EXPECT_TRUE(
      test::bitwise_equal(dist::all_gather(x.to(gpu())).to(Device::cpu()), dist::all_gather(x)));
  EXPECT_TRUE(test::bitwise_equal(dist::broadcast(x.to(gpu()), 0).to(Device::cpu()),
                                  dist::broadcast(x, 0)));
}

TEST(Nccl, CapturedStepHoldsTheNcclCall) {
  REQUIRE_NCCL();
  const Tensor w = full({64}, 0.5, DType::Float32, gpu());
  auto step = trace([&](const Tensor& x) { return dist::all_reduce(x * w, "sum"); });
  const Tensor x = full({64}, dist::rank() + 1.0, DType::Float32, gpu());
  const Tensor eager = dist::all_reduce(x * w, "sum").to(Device::cpu());
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(test::bitwise_equal(step(x).to(Device::cpu()), eager)) << "call " << i;
  const graph::Plan* plan = step.function().last_plan();
  ASSERT_TRUE(plan && plan->captured());
  const std::vector<std::string> names = plan->device_graph()->kernel_names();
  const bool nccl = std::any_of(names.begin(), names.end(), [](std::string n) {
    std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
    return n.find("nccl") != std::string::npos;
  });
  EXPECT_TRUE(nccl) << "no NCCL kernel among the captured graph's " << names.size() << " kernels";
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
