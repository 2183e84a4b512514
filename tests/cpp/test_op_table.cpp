// The test table: every op in the registry, from each of its row's example calls
// (OpDef::examples) — float64 gradcheck against finite differences (a float32-only fast path:
// its example against its composed reference), eager and replayed results bit for bit, and
// CPU/CUDA parity when a GPU is present. Coverage is part of it: an op without an example, a
// differentiable op without a CPU kernel, or (with the CUDA backend built) an op without a CUDA
// kernel fails EveryOpIsCovered, unless the row is a fast path of the other backend only
// (OpDef::backends); the CUDA kernels' registrations are also read from the sources, in every
// build (EveryCudaKernelIsRegisteredInTheSources).
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include "autograd/gradcheck.h"
#include "graph/trace.h"
#include "helpers.h"
#include "op_cases.h"
#include "ops/elementwise.h"
#include "ops/examples.h"

namespace encore {
namespace {

using test::bitwise_equal;
using test::expect_close;

constexpr uint64_t kSeed = 4242;

bool has_kernel(const OpDef& def) {
  return def.kind == OpKind::Compute || def.kind == OpKind::InPlace;
}

// A fast path of another backend (cuDNN's RNN) has no CPU kernel; the table runs it only there.
bool cpu_runnable(const OpDef& def) { return def.runs_on(DeviceType::CPU); }

// Runs example `e` with every random op drawing the same values each time.
Outputs run(const OpDef& def, const Example& e, std::span<const Tensor> in,
            Device device = Device::cpu()) {
  manual_seed(kSeed);
  return run_example(def, e, in, device);
}

using Case = test::OpCase;

TEST(OpTable, EveryOpIsCovered) {
  for (const OpDef* def : all_ops()) {
    EXPECT_FALSE(def->examples.empty()) << def->name << " has no example";
    for (const Example& e : def->examples) {
      EXPECT_TRUE(e.call || def->invoke) << def->name << " has an example without a call";
      // A float32-only fast path runs where it has kernels, and is checked against its reference.
      EXPECT_TRUE(!def->backends || !cpu_runnable(*def) || e.reference)
          << def->name << " is a CPU fast path without a composed reference";
    }
    EXPECT_TRUE(!def->signature || def->invoke) << def->name << " has a signature but no invoke";
    EXPECT_TRUE(def->kind != OpKind::Composite || def->signature)
        << "composite " << def->name << " is not public";
    for (DeviceType t : {DeviceType::CPU, DeviceType::CUDA}) {
      const bool built = t == DeviceType::CPU || cuda_built();
      EXPECT_TRUE(!built || !has_kernel(*def) || !def->runs_on(t) ||
                  def->kernels[static_cast<int>(t)].run)
          << def->name << " has no " << (t == DeviceType::CPU ? "CPU" : "CUDA") << " kernel";
    }
  }
  EXPECT_EQ(orphan_kernels(), std::vector<std::string>{})
      << "kernels registered for ops no row defines";
}

// What the CUDA backend's sources declare, read as text: the op names each family file registers
// kernels for (register_cuda_kernels({{"name", kernel}, ...}), or the elementwise list) and the
// rows the plugin defines itself (cuDNN's fast paths: `.name = "..."`).
struct CudaSources {
  std::set<std::string> kernels, rows;
};

CudaSources read_cuda_sources() {
  CudaSources s;
  const std::regex entry(R"re(\{\s*"(\w+)")re"), row(R"re(\.name\s*=\s*"(\w+)")re");
  for (const auto& file : std::filesystem::directory_iterator(
           std::filesystem::path(ENCORE_SOURCE_DIR) / "ops" / "cuda")) {
    const std::string ext = file.path().extension().string();
    if (ext != ".cu" && ext != ".cpp") continue;
    std::ifstream in(file.path());
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // The call as clang-format lays it out: "register_cuda_kernels({" or "register_cuda_kernels(\n
    // {".
    for (size_t at = text.find("register_cuda_kernels("); at != std::string::npos;
         at = text.find("register_cuda_kernels(", at + 1)) {
      const std::string list = text.substr(at, text.find("});", at) - at);
      for (std::sregex_iterator m(list.begin(), list.end(), entry), end; m != end; ++m)
        s.kernels.insert((*m)[1]);
    }
    for (std::sregex_iterator m(text.begin(), text.end(), row), end; m != end; ++m)
      s.rows.insert((*m)[1]);
    // The elementwise kernels are made from one list for both backends (ops/elementwise.h): a
    // file that registers the list's entries of one arity registers each of their names.
    if (text.find("for_each_elementwise_op(") == std::string::npos) continue;
    for_each_elementwise_op([&](const auto& op) {
      using Op = std::decay_t<decltype(op)>;
      if (text.find("Op::arity == " + std::to_string(Op::arity)) != std::string::npos)
        s.kernels.insert(std::string(op.name));
    });
  }
  return s;
}

// The CUDA backend's coverage from its sources, in every build (a CPU-only one too, and without
// a GPU): every op with a kernel that may run on CUDA has its CUDA kernel registered, and every
// registered name is an op.
TEST(OpTable, EveryCudaKernelIsRegisteredInTheSources) {
  const CudaSources s = read_cuda_sources();
  ASSERT_GT(s.kernels.size(), 50u)
      << "read no registrations from " << ENCORE_SOURCE_DIR << "/ops/cuda";
  for (const OpDef* def : all_ops()) {
    if (has_kernel(*def) && def->runs_on(DeviceType::CUDA)) {
      EXPECT_TRUE(s.kernels.count(def->name))
          << def->name << " registers no CUDA kernel in ops/cuda/";
    }
  }
  for (const std::string& name : s.kernels)
    EXPECT_TRUE(find_op(name) || s.rows.count(name))
        << "ops/cuda/ registers a kernel for '" << name << "', which no row defines";
  for (const std::string& name : s.rows)
    EXPECT_TRUE(s.kernels.count(name))
        << "the CUDA plugin's row " << name << " registers no kernel";
}

class OpTable : public ::testing::TestWithParam<Case> {
 protected:
  const OpDef& def() const { return op(GetParam().first); }
  const Example& example() const { return def().examples[GetParam().second]; }
  Outputs run(std::span<const Tensor> in, Device device = Device::cpu()) const {
    return encore::run(def(), example(), in, device);
  }
  std::string what() const {
    return def().name + std::string(" example ") + std::to_string(GetParam().second);
  }
};

TEST_P(OpTable, GradientsMatchFiniteDifferences) {
  if (!cpu_runnable(def())) GTEST_SKIP() << "no CPU kernel";
  if (example().reference) GTEST_SKIP() << "float32 only: MatchesItsReference checks it";
  const std::vector<Tensor> x = example_inputs(example(), DType::Float64, Device::cpu());
  // Differentiable when an output tracks the floating inputs.
  std::vector<Tensor> probe;
  for (const Tensor& t : x) {
    Tensor c = t.detach().clone();
    if (is_floating(c.dtype())) c.set_requires_grad(true);
    probe.push_back(c);
  }
  bool differentiable = false;
  for (const Tensor& y : run(probe)) differentiable |= y.requires_grad();
  // A primitive's example is differentiable exactly when its row has a backward formula.
  EXPECT_TRUE(!has_kernel(def()) || differentiable == def().differentiable()) << what();
  if (!differentiable) GTEST_SKIP() << "not differentiable";
  const GradcheckResult r = gradcheck([&](const std::vector<Tensor>& in) { return run(in); }, x,
                                      {.eps = example().gradcheck_eps});
  EXPECT_TRUE(r.ok) << what() << ": max abs error " << r.max_abs_error << "\n" << r.report;
}

// A fast path without float64 kernels (oneDNN's RNN): its example's outputs, gradients included,
// equal its composed reference's in float32.
TEST_P(OpTable, MatchesItsReference) {
  const Example& e = example();
  if (!e.reference || !cpu_runnable(def())) GTEST_SKIP() << "gradcheck checks it";
  const std::vector<Tensor> x = example_inputs(e, DType::Float32, Device::cpu());
  const Outputs got = run(x);
  const Outputs want = e.reference(x);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    expect_close(want[i], got[i], e.parity_tolerance, what() + " output " + std::to_string(i));
}

TEST_P(OpTable, ReplayIsBitwiseTheEagerCall) {
  if (!cpu_runnable(def())) GTEST_SKIP() << "no CPU kernel";
  const std::vector<Tensor> x = example_inputs(example(), DType::Float32, Device::cpu());
  const Outputs eager = run(x);
  const std::vector<graph::Arg> args(x.begin(), x.end());
  TracedFunction f([&](const std::vector<graph::Arg>& a) {
    std::vector<Tensor> in;
    for (const graph::Arg& v : a)
      if (const Tensor* t = std::get_if<Tensor>(&v)) in.push_back(*t);
    return run_example(def(), example(), in);
  });
  manual_seed(kSeed);
  (void)f(args);  // runs eagerly, then traces
  manual_seed(kSeed);
  const std::vector<Tensor> replayed = f(args);
  ASSERT_EQ(f.stats().hits, 1) << f.explain();
  ASSERT_EQ(replayed.size(), eager.size());
  for (size_t i = 0; i < eager.size(); ++i)
    EXPECT_TRUE(bitwise_equal(eager[i], replayed[i])) << what() << " output " << i;
}

TEST_P(OpTable, CudaMatchesTheCpu) {
  REQUIRE_CUDA();
  if (!def().runs_on(DeviceType::CUDA)) GTEST_SKIP() << "a CPU fast path";
  const std::vector<Tensor> x = example_inputs(example(), DType::Float32, Device::cpu());
  std::vector<Tensor> on_gpu;
  for (const Tensor& t : x) on_gpu.push_back(t.to(test::kGpu));
  const Outputs gpu = run(on_gpu, test::kGpu);
  if (!cpu_runnable(def())) {
    for (const Tensor& y : gpu) EXPECT_EQ(y.device(), test::kGpu);
    return;  // CUDA fast paths are compared with their composed equivalents in test_cuda_lstm.cpp
  }
  const Outputs cpu = run(x);
  ASSERT_EQ(gpu.size(), cpu.size());
  for (size_t i = 0; i < cpu.size(); ++i)
    expect_close(cpu[i], gpu[i], example().parity_tolerance,
                 what() + " output " + std::to_string(i));
}

INSTANTIATE_TEST_SUITE_P(EveryOp, OpTable, ::testing::ValuesIn(test::op_cases()),
                         test::op_case_name);

TEST(OpTable, GradcheckDetectsAWrongGradient) {
  // A function whose gradient is deliberately cut: detach() hides x from autograd.
  const GradcheckResult r = gradcheck(
      [](auto& x) { return std::vector<Tensor>{x[0] * x[0].detach()}; }, {test::rand64({3})});
  EXPECT_FALSE(r.ok);
}

}  // namespace
}  // namespace encore
