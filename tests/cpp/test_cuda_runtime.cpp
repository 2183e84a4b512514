// The CUDA runtime around the kernels: allocation failures, absent devices, kernels called
// with prepared state (as a Plan calls them), and the fused optimizer updates.
#include "core/modes.h"
#include "helpers.h"
#include "ops/conv.h"
#include "ops/dispatch.h"
#include "ops/optim_math.h"
#include "ops/reduce.h"

namespace encore {
namespace {

using test::rand64;

using test::kGpu;

// These need the CUDA backend built, not a GPU (every op's CUDA kernel: test_op_table.cpp).
TEST(CudaRuntime, CudnnLstmIsACudaOnlyOp) {
  if (!cuda_built()) GTEST_SKIP() << "no CUDA backend in this build";
  const int cpu = static_cast<int>(DeviceType::CPU), cuda = static_cast<int>(DeviceType::CUDA);
  for (const char* name : {"cudnn_lstm", "cudnn_lstm_backward"}) {
    const OpDef& def = op(name);
    EXPECT_TRUE(def.infer && def.kernels[cuda].run && def.kernels[cuda].prepare) << def.name;
    EXPECT_FALSE(def.kernels[cpu].run) << def.name;
  }
  EXPECT_TRUE(op("cudnn_lstm").differentiable());
}

TEST(CudaRuntime, AbsentDeviceIsADeviceError) {
  EXPECT_THROW(Tensor::empty({4}, DType::Float32, Device::cuda(100)), DeviceError);
}

TEST(CudaRuntime, OutOfMemoryIsRecoverable) {
  REQUIRE_CUDA();
  try {
    Tensor::empty({int64_t{1} << 40}, DType::Float32, kGpu);  // 4 TiB
    ADD_FAILURE() << "a 4 TiB allocation succeeded";
  } catch (const OutOfMemoryError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cuda:0"), std::string::npos) << what;
    EXPECT_NE(what.find("4398046511104 bytes"), std::string::npos) << what;
  }
  // The failure left nothing behind: the next ops run and synchronize cleanly.
  const Tensor a = full({1000}, 2.0, DType::Float32, kGpu);
  test::expect_values(sum(a + a), {4000});
  EXPECT_NO_THROW(synchronize(kGpu));
}

// Calls op `id` the way a Plan does: outputs allocated up front, prepare once, then the kernel
// with the prepared state (twice: a replay reuses it).
OutList run_prepared(const OpDef& def, std::span<const Tensor> in, const Attrs& attrs) {
  TensorMeta metas[kMaxOutputs];
  OutList out;
  out.n = def.infer(def, in, attrs, metas);
  std::vector<TensorRef> in_refs, out_refs;
  for (const Tensor& t : in) in_refs.push_back(ref(t));
  for (int i = 0; i < out.n; ++i) {
    out[i] = Tensor::empty(metas[i].shape, metas[i].dtype, metas[i].device);
    out_refs.push_back(ref(out[i]));
  }
  const int cuda = static_cast<int>(DeviceType::CUDA);
  KernelCtx ctx{in_refs, out_refs, attrs, nullptr};
  std::shared_ptr<void> state;
  if (def.kernels[cuda].prepare) state = def.kernels[cuda].prepare(ctx);
  ctx.state = state.get();
  def.kernels[cuda].run(ctx);
  def.kernels[cuda].run(ctx);
  return out;
}

TEST(CudaRuntime, PreparedKernelsGiveTheEagerResult) {
  REQUIRE_CUDA();
  const Tensor x = rand64({2, 34, 3}, 1).to(DType::Float32).to(kGpu);
  const Tensor w = rand64({5, 3, 4}, 2).to(DType::Float32).to(kGpu);
  const auto [pl, pr] = window_padding("conv1d", 34, 5, 4, 2, Padding::same());
  const Attrs conv = ConvAttrs{4, 2, pl, pr, 34, 5};
  const Tensor y = conv1d(x, w, 4, Padding::same(), 2);
  const Tensor fwd_in[] = {x, w};
  EXPECT_TRUE(test::bitwise_equal(y, run_prepared(op("conv1d"), fwd_in, conv)[0]));
  const Tensor gy = rand64(y.shape(), 3).to(DType::Float32).to(kGpu);
  const Tensor data_in[] = {gy, w}, filter_in[] = {x, gy};
  const Tensor gx = call(op("conv1d_backward_data"), {gy, w}, conv);
  const Tensor gw = call(op("conv1d_backward_filter"), {x, gy}, conv);
  EXPECT_TRUE(test::bitwise_equal(gx, run_prepared(op("conv1d_backward_data"), data_in, conv)[0]));
  EXPECT_TRUE(
      test::bitwise_equal(gw, run_prepared(op("conv1d_backward_filter"), filter_in, conv)[0]));

  // Reductions with scratch space: the CUB path and the split path.
  for (const Shape& s : {Shape{300, 1000}, Shape{50000, 3}}) {
    const Tensor v = rand64(s, 4).to(DType::Float32).to(kGpu);
    for (const ReduceAttrs r :
         {ReduceAttrs{1u, false}, ReduceAttrs{3u, false}, ReduceAttrs{2u, true}}) {
      const Tensor in[] = {v};
      const Tensor eager = call(op("sum"), {v}, r);
      EXPECT_TRUE(test::bitwise_equal(eager, run_prepared(op("sum"), in, r)[0]))
          << s.str() << " " << r.str();
      EXPECT_TRUE(test::bitwise_equal(call(op("max"), {v}, r), run_prepared(op("max"), in, r)[0]));
    }
  }
}

bool any_nan(const Tensor& t) {
  for (double v : t.to_vector<double>())
    if (std::isnan(v)) return true;
  return false;
}

// One optimizer step on the CPU and on the GPU from the same state; `groups` tensors per
// parameter (params first), then the scalars.
void expect_same_update(const OpDef& op, const Attrs& attrs, int groups,
                        const std::vector<Shape>& shapes, const std::vector<Tensor>& scalars,
                        int steps) {
  NoGradGuard no_grad;
  std::vector<Tensor> cpu, gpu;
  const int n = static_cast<int>(shapes.size());
  for (int g = 0; g < groups; ++g)
    for (int p = 0; p < n; ++p) {
      // Parameters alternate float32 / float64; second moments must be non-negative.
      const DType dt = p % 3 == 2 ? DType::Float64 : DType::Float32;
      Tensor t = rand64(shapes[p], 10 * g + p + 1);
      if (&op == &encore::op("adam_update") && g == 2) t = abs(t);
      // RMSprop: v >= 1 and a small mean gradient keep the centered variance positive.
      if (&op == &encore::op("rmsprop_update") && g == 1) t = abs(t) + 1.0;
      if (&op == &encore::op("rmsprop_update") && g > 1 && g < groups - 1) t = t * 0.1;
      cpu.push_back(t.to(dt));
      gpu.push_back(t.to(dt).to(kGpu));
    }
  for (const Tensor& s : scalars) {
    cpu.push_back(s.clone());
    gpu.push_back(s.to(kGpu));
  }
  for (int step = 1; step <= steps; ++step) {
    if (&op == &encore::op("adam_update")) {
      cpu[cpu.size() - 2].fill_(step);
      gpu[gpu.size() - 2].fill_(step);
    }
    dispatch(op, cpu, attrs);
    dispatch(op, gpu, attrs);
  }
  // The state tensors (params, buffers) agree; float32 math may differ in the last bits.
  for (size_t i = 0; i < static_cast<size_t>((groups - 1) * n); ++i) {
    const Tensor& c = cpu[i];
    const double tol = c.dtype() == DType::Float32 ? 1e-5 : 1e-12;
    EXPECT_LE(test::max_abs_diff(c, gpu[i]), tol) << "tensor " << i << " " << describe(c);
    // max_abs_diff drops NaNs (std::max keeps the number): a NaN from the GPU must still fail.
    EXPECT_FALSE(any_nan(gpu[i])) << "tensor " << i << " " << describe(c);
  }
}

TEST(CudaRuntime, SgdUpdate) {
  REQUIRE_CUDA();
  // More parameters than one launch's table holds, one of them empty.
  std::vector<Shape> shapes;
  for (int i = 0; i < 53; ++i) shapes.push_back(i == 7 ? Shape{0} : Shape{i % 5 + 1, 3 * i + 1});
  shapes.push_back({5000});
  const Tensor lr = full({}, 0.05, DType::Float64);
  expect_same_update(op("sgd_update"), SgdAttrs{0.0, 0.0, false}, 2, shapes, {lr}, 3);
  expect_same_update(op("sgd_update"), SgdAttrs{0.9, 1e-3, false}, 3, shapes, {lr}, 3);
  expect_same_update(op("sgd_update"), SgdAttrs{0.9, 0.0, true}, 3, shapes, {lr}, 3);
}

TEST(CudaRuntime, AdamUpdate) {
  REQUIRE_CUDA();
  std::vector<Shape> shapes;
  for (int i = 0; i < 50; ++i) shapes.push_back({i % 4 + 1, 2 * i + 3});
  shapes.push_back({10000});
  const Tensor step = full({}, 1, DType::Int64), lr = full({}, 1e-2, DType::Float64);
  expect_same_update(op("adam_update"), AdamAttrs{0.9, 0.999, 1e-7, 0.0}, 4, shapes, {step, lr}, 3);
  expect_same_update(op("adam_update"), AdamAttrs{0.8, 0.99, 1e-8, 1e-2}, 4, shapes, {step, lr}, 2);
  expect_same_update(op("adam_update"), AdamAttrs{0.9, 0.999, 1e-7, 1e-2, true, true}, 4, shapes,
                     {step, lr}, 3);
}

TEST(CudaRuntime, RmspropUpdate) {
  REQUIRE_CUDA();
  std::vector<Shape> shapes;
  for (int i = 0; i < 50; ++i) shapes.push_back({i % 4 + 1, 2 * i + 3});
  shapes.push_back({10000});
  const Tensor lr = full({}, 1e-2, DType::Float64);
  expect_same_update(op("rmsprop_update"), RmspropAttrs{0.9, 0.0, 1e-7, false}, 3, shapes, {lr}, 3);
  expect_same_update(op("rmsprop_update"), RmspropAttrs{0.9, 0.5, 1e-7, false}, 4, shapes, {lr}, 3);
  expect_same_update(op("rmsprop_update"), RmspropAttrs{0.8, 0.0, 1e-6, true}, 4, shapes, {lr}, 3);
  expect_same_update(op("rmsprop_update"), RmspropAttrs{0.9, 0.9, 1e-7, true}, 5, shapes, {lr}, 2);
}

}  // namespace
}  // namespace encore
