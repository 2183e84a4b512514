// The test table: every op in the registry, from its row's example call (OpDef::example) —
// float64 gradcheck against finite differences (a float32-only fast path: its example against
// its composed reference), eager and replayed results bit for bit, and CPU/CUDA parity when a GPU
// is present. Coverage is part of it: an op without an example, a differentiable op without a
// CPU kernel, or (with the CUDA backend built) an op without a CUDA kernel fails
// EveryOpIsCovered, unless the row is a fast path of the other backend only (OpDef::backends).
#include "autograd/gradcheck.h"
#include "graph/trace.h"
#include "helpers.h"
#include "ops/examples.h"

namespace encore {
namespace {

using test::bitwise_equal;
using test::expect_close;

constexpr uint64_t kSeed = 4242;

bool has_kernel(const OpDef& def) { return def.kind == OpKind::Compute || def.kind == OpKind::InPlace; }

// A fast path of another backend (cuDNN's RNN) has no CPU kernel; the table runs it only there.
bool cpu_runnable(const OpDef& def) { return def.runs_on(DeviceType::CPU); }

// Runs the example with every random op drawing the same values each time.
Outputs run(const OpDef& def, std::span<const Tensor> in, Device device = Device::cpu()) {
  manual_seed(kSeed);
  return run_example(def, in, device);
}

std::vector<std::string> op_names() {
  std::vector<std::string> names;
  for (const OpDef* def : all_ops()) names.push_back(def->name);
  return names;
}

TEST(OpTable, EveryOpIsCovered) {
  for (const OpDef* def : all_ops()) {
    const Example& e = def->example;
    EXPECT_TRUE(e.call || def->invoke) << def->name << " has no example call";
    EXPECT_TRUE(!def->signature || def->invoke) << def->name << " has a signature but no invoke";
    EXPECT_TRUE(def->kind != OpKind::Composite || def->signature) << "composite " << def->name << " is not public";
    for (DeviceType t : {DeviceType::CPU, DeviceType::CUDA}) {
      const bool built = t == DeviceType::CPU || cuda_built();
      EXPECT_TRUE(!built || !has_kernel(*def) || !def->runs_on(t) || def->kernels[static_cast<int>(t)].run)
          << def->name << " has no " << (t == DeviceType::CPU ? "CPU" : "CUDA") << " kernel";
    }
    // A float32-only fast path runs where it has kernels, and is checked against its reference.
    EXPECT_TRUE(!def->backends || !cpu_runnable(*def) || e.reference)
        << def->name << " is a CPU fast path without a composed reference";
  }
  EXPECT_EQ(orphan_kernels(), std::vector<std::string>{}) << "kernels registered for ops no row defines";
}

class OpTable : public ::testing::TestWithParam<std::string> {
 protected:
  const OpDef& def() const { return op(GetParam()); }
};

TEST_P(OpTable, GradientsMatchFiniteDifferences) {
  if (!cpu_runnable(def())) GTEST_SKIP() << "no CPU kernel";
  if (def().example.reference) GTEST_SKIP() << "float32 only: MatchesItsReference checks it";
  const std::vector<Tensor> x = example_inputs(def(), DType::Float64, Device::cpu());
  // Differentiable when an output tracks the floating inputs.
  std::vector<Tensor> probe;
  for (const Tensor& t : x) {
    Tensor c = t.detach().clone();
    if (is_floating(c.dtype())) c.set_requires_grad(true);
    probe.push_back(c);
  }
  bool differentiable = false;
  for (const Tensor& y : run(def(), probe)) differentiable |= y.requires_grad();
  // A primitive's example is differentiable exactly when its row has a backward formula.
  EXPECT_TRUE(!has_kernel(def()) || differentiable == def().differentiable()) << def().name;
  if (!differentiable) GTEST_SKIP() << "not differentiable";
  const GradcheckResult r = gradcheck([&](const std::vector<Tensor>& in) { return run(def(), in); }, x,
                                      {.eps = def().example.gradcheck_eps});
  EXPECT_TRUE(r.ok) << def().name << ": max abs error " << r.max_abs_error << "\n" << r.report;
}

// A fast path without float64 kernels (oneDNN's RNN): its example's outputs, gradients included,
// equal its composed reference's in float32.
TEST_P(OpTable, MatchesItsReference) {
  const Example& e = def().example;
  if (!e.reference || !cpu_runnable(def())) GTEST_SKIP() << "gradcheck checks it";
  const std::vector<Tensor> x = example_inputs(def(), DType::Float32, Device::cpu());
  const Outputs got = run(def(), x);
  const Outputs want = e.reference(x);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    expect_close(want[i], got[i], e.parity_tolerance, def().name + std::string(" output ") + std::to_string(i));
}

TEST_P(OpTable, ReplayIsBitwiseTheEagerCall) {
  if (!cpu_runnable(def())) GTEST_SKIP() << "no CPU kernel";
  const std::vector<Tensor> x = example_inputs(def(), DType::Float32, Device::cpu());
  const Outputs eager = run(def(), x);
  const std::vector<graph::Arg> args(x.begin(), x.end());
  TracedFunction f([&](const std::vector<graph::Arg>& a) {
    std::vector<Tensor> in;
    for (const graph::Arg& v : a)
      if (const Tensor* t = std::get_if<Tensor>(&v)) in.push_back(*t);
    return run_example(def(), in);
  });
  manual_seed(kSeed);
  (void)f(args);  // runs eagerly, then traces
  manual_seed(kSeed);
  const std::vector<Tensor> replayed = f(args);
  ASSERT_EQ(f.stats().hits, 1) << f.explain();
  ASSERT_EQ(replayed.size(), eager.size());
  for (size_t i = 0; i < eager.size(); ++i)
    EXPECT_TRUE(bitwise_equal(eager[i], replayed[i])) << def().name << " output " << i;
}

TEST_P(OpTable, CudaMatchesTheCpu) {
  REQUIRE_CUDA();
  if (!def().runs_on(DeviceType::CUDA)) GTEST_SKIP() << "a CPU fast path";
  const std::vector<Tensor> x = example_inputs(def(), DType::Float32, Device::cpu());
  std::vector<Tensor> on_gpu;
  for (const Tensor& t : x) on_gpu.push_back(t.to(test::kGpu));
  const Outputs gpu = run(def(), on_gpu, test::kGpu);
  if (!cpu_runnable(def())) {
    for (const Tensor& y : gpu) EXPECT_EQ(y.device(), test::kGpu);
    return;  // CUDA fast paths are compared with their composed equivalents in test_cuda_lstm.cpp
  }
  const Outputs cpu = run(def(), x);
  ASSERT_EQ(gpu.size(), cpu.size());
  for (size_t i = 0; i < cpu.size(); ++i)
    expect_close(cpu[i], gpu[i], def().example.parity_tolerance, def().name + std::string(" output ") + std::to_string(i));
}

INSTANTIATE_TEST_SUITE_P(EveryOp, OpTable, ::testing::ValuesIn(op_names()),
                         [](const auto& info) { return info.param; });

TEST(OpTable, GradcheckDetectsAWrongGradient) {
  // A function whose gradient is deliberately cut: detach() hides x from autograd.
  const GradcheckResult r =
      gradcheck([](auto& x) { return std::vector<Tensor>{x[0] * x[0].detach()}; }, {test::rand64({3})});
  EXPECT_FALSE(r.ok);
}

}  // namespace
}  // namespace encore
