// The cuDNN LSTM fast path against the composed lstm_cell loop (CPU, float64): outputs and
// the gradients of every input. Skipped without a GPU; in a CPU build the op is unavailable.
#include "helpers.h"
#include "ops/dispatch.h"
#include "ops/nn.h"

namespace encore {
namespace {

using test::rand64;

using test::expect_close;
using test::kGpu;

struct LstmRun {
  Tensor y, h, c;
  std::vector<Tensor> grads;  // x, h0, c0, W, R, b
};

// inputs: x (B, T, C), h0, c0 (B, U), W (C, 4U), R (U, 4U), b (4U). The loss weighs y, hT and cT
// (any of them may be left out, to check undefined incoming gradients).
LstmRun run(const std::vector<Tensor>& inputs, Device device, DType dtype, bool cudnn, bool use_y,
            bool use_c) {
  std::vector<Tensor> in;
  for (const Tensor& t : inputs) {
    Tensor v = t.to(dtype).to(device);
    if (v.same(t)) v = v.clone();
    in.push_back(v.set_requires_grad());
  }
  LstmRun r;
  if (cudnn) {
    const OutList out =
        dispatch(op("cudnn_lstm"), in, LstmAttrs{Activation::Tanh, Activation::Sigmoid});
    r.y = out[0], r.h = out[1], r.c = out[2];
    EXPECT_EQ(out.n, 4);
  } else {
    Tensor h = in[1], c = in[2];
    std::vector<Tensor> ys;
    const int64_t steps = in[0].shape()[1];
    for (int64_t t = 0; t < steps; ++t) {
      const Tensor z =
          matmul(in[0].slice(1, t, t + 1).squeeze(1), in[3]) + matmul(h, in[4]) + in[5];
      std::tie(h, c) = lstm_cell(z, c, Activation::Tanh, Activation::Sigmoid);
      ys.push_back(h);
    }
    r.y = stack(ys, 1), r.h = h, r.c = c;
  }
  auto weigh = [&](const Tensor& t, uint64_t seed) {
    return sum(t * rand64(t.shape(), seed).to(dtype).to(device));
  };
  Tensor loss = weigh(r.h, 11);
  if (use_y) loss = loss + weigh(r.y, 12);
  if (use_c) loss = loss + weigh(r.c, 13);
  loss.backward();
  for (const Tensor& t : in) r.grads.push_back(t.grad());
  return r;
}

std::vector<Tensor> lstm_inputs(int64_t batch, int64_t steps, int64_t features, int64_t units) {
  return {rand64({batch, steps, features}, 1), rand64({batch, units}, 2) * 0.5,
          rand64({batch, units}, 3) * 0.5,     rand64({features, 4 * units}, 4) * 0.5,
          rand64({units, 4 * units}, 5) * 0.5, rand64({4 * units}, 6) * 0.5};
}

TEST(CudaLstm, CudnnMatchesComposedCells) {
  REQUIRE_CUDA();
  const char* names[] = {"x", "h0", "c0", "kernel", "recurrent_kernel", "bias"};
  struct Shape4 {
    int64_t batch, steps, features, units;
  };
  for (const Shape4& s : {Shape4{3, 5, 4, 6}, Shape4{1, 1, 3, 2}, Shape4{7, 12, 9, 16}}) {
    for (auto [use_y, use_c] :
         {std::pair{true, true}, std::pair{false, false}, std::pair{true, false}}) {
      SCOPED_TRACE(detail::cat("B=", s.batch, " T=", s.steps, " C=", s.features, " U=", s.units,
                               use_y ? " +y" : "", use_c ? " +c" : ""));
      const auto inputs = lstm_inputs(s.batch, s.steps, s.features, s.units);
      const LstmRun ref = run(inputs, Device::cpu(), DType::Float64, false, use_y, use_c);
      const LstmRun got = run(inputs, kGpu, DType::Float32, true, use_y, use_c);
      expect_close(ref.y, got.y, 1e-4, "y");
      expect_close(ref.h, got.h, 1e-4, "hT");
      expect_close(ref.c, got.c, 1e-4, "cT");
      for (int i = 0; i < 6; ++i)
        expect_close(ref.grads[i], got.grads[i], 2e-4, std::string("grad of ") + names[i]);
    }
  }
}

TEST(CudaLstm, ComposedCellsOnTheGpuAgree) {
  REQUIRE_CUDA();
  const auto inputs = lstm_inputs(2, 4, 3, 5);
  const LstmRun ref = run(inputs, Device::cpu(), DType::Float64, false, true, true);
  const LstmRun got = run(inputs, kGpu, DType::Float32, false, true, true);
  expect_close(ref.y, got.y, 1e-5, "y");
  for (int i = 0; i < 6; ++i)
    expect_close(ref.grads[i], got.grads[i], 1e-4, "grad " + std::to_string(i));
}

TEST(CudaLstm, RejectsWhatCudnnCannotDo) {
  REQUIRE_CUDA();
  std::vector<Tensor> in;
  for (const Tensor& t : lstm_inputs(2, 3, 4, 5)) in.push_back(t.to(DType::Float32).to(kGpu));
  EXPECT_THROW(dispatch(op("cudnn_lstm"), in, LstmAttrs{Activation::Relu, Activation::Sigmoid}),
               UnsupportedError);
  std::vector<Tensor> cpu;
  for (const Tensor& t : in) cpu.push_back(t.to(Device::cpu()));
  EXPECT_THROW(dispatch(op("cudnn_lstm"), cpu, LstmAttrs{Activation::Tanh, Activation::Sigmoid}),
               DeviceError);
  std::vector<Tensor> f64;
  for (const Tensor& t : in) f64.push_back(t.to(DType::Float64));
  EXPECT_THROW(dispatch(op("cudnn_lstm"), f64, LstmAttrs{Activation::Tanh, Activation::Sigmoid}),
               DTypeError);
  in[4] = zeros({4, 20}, DType::Float32, kGpu);  // recurrent kernel of the wrong size
  EXPECT_THROW(dispatch(op("cudnn_lstm"), in, LstmAttrs{Activation::Tanh, Activation::Sigmoid}),
               ShapeError);
}

TEST(CudaLstm, UnavailableWithoutTheCudaBackend) {
  if (cuda_built()) GTEST_SKIP() << "the CUDA backend defines cudnn_lstm";
  std::vector<Tensor> in = lstm_inputs(2, 3, 4, 5);
  EXPECT_THROW(dispatch(op("cudnn_lstm"), in, LstmAttrs{Activation::Tanh, Activation::Sigmoid}),
               UnsupportedError);
}

// What a Plan does: prepare once, then call the kernel with the prepared state.
TEST(CudaLstm, PreparedStateGivesTheEagerResult) {
  REQUIRE_CUDA();
  std::vector<Tensor> in;
  for (const Tensor& t : lstm_inputs(3, 6, 4, 8)) in.push_back(t.to(DType::Float32).to(kGpu));
  const LstmAttrs attrs{Activation::Tanh, Activation::Sigmoid};
  const OutList eager = dispatch(op("cudnn_lstm"), in, attrs);
  const OpDef& def = op("cudnn_lstm");
  TensorMeta metas[kMaxOutputs];
  const int n = def.infer(def, in, attrs, metas);
  ASSERT_EQ(n, 4);
  std::vector<Tensor> outs;
  std::vector<TensorRef> in_refs, out_refs;
  for (const Tensor& t : in) in_refs.push_back(ref(t));
  for (int i = 0; i < n; ++i) {
    outs.push_back(Tensor::empty(metas[i].shape, metas[i].dtype, metas[i].device));
    out_refs.push_back(ref(outs.back()));
  }
  const int cuda = static_cast<int>(DeviceType::CUDA);
  const Attrs a = attrs;
  KernelCtx ctx{in_refs, out_refs, a, nullptr};
  ASSERT_TRUE(def.kernels[cuda].prepare);
  const std::shared_ptr<void> state = def.kernels[cuda].prepare(ctx);
  ctx.state = state.get();
  for (int rep = 0; rep < 2; ++rep) {
    def.kernels[cuda].run(ctx);
    for (int i = 0; i < 3; ++i)
      EXPECT_TRUE(test::bitwise_equal(eager[i], outs[i])) << "output " << i;
  }
}

}  // namespace
}  // namespace encore
