// The cuDNN GRU fast path against the composed gru_cell loop (CPU, float64): outputs and the
// gradients of every input, and the GRU layer's two paths on the GPU. Skipped without a GPU; in
// a CPU build the op is unavailable.
#include "helpers.h"
#include "nn/gru.h"
#include "ops/dispatch.h"
#include "ops/nn.h"

namespace encore {
namespace {

using test::expect_close;
using test::kGpu;
using test::rand64;

struct GruRun {
  Tensor y, h;
  std::vector<Tensor> grads;  // x, h0, W, R, b
};

// inputs: x (B, T, C), h0 (B, U), W (C, 3U), R (U, 3U), b (2, 3U). The loss weighs y and hT
// (y may be left out, to check an undefined incoming gradient).
GruRun run(const std::vector<Tensor>& inputs, Device device, DType dtype, bool cudnn, bool use_y) {
  std::vector<Tensor> in;
  for (const Tensor& t : inputs) {
    Tensor v = t.to(dtype).to(device);
    if (v.same(t)) v = v.clone();
    in.push_back(v.set_requires_grad());
  }
  GruRun r;
  if (cudnn) {
    const OutList out =
        dispatch(op("cudnn_gru"), in, LstmAttrs{Activation::Tanh, Activation::Sigmoid});
    EXPECT_EQ(out.n, 3);
    r.y = out[0], r.h = out[1];
  } else {
    Tensor h = in[1];
    std::vector<Tensor> ys;
    const Tensor b_in = in[4].slice(0, 0, 1).squeeze(0), b_rec = in[4].slice(0, 1, 2).squeeze(0);
    for (int64_t t = 0; t < in[0].shape()[1]; ++t) {
      const Tensor xz = matmul(in[0].slice(1, t, t + 1).squeeze(1), in[2]) + b_in;
      h = gru_cell(xz, matmul(h, in[3]) + b_rec, h, Activation::Tanh, Activation::Sigmoid);
      ys.push_back(h);
    }
    r.y = stack(ys, 1), r.h = h;
  }
  auto weigh = [&](const Tensor& t, uint64_t seed) {
    return sum(t * rand64(t.shape(), seed).to(dtype).to(device));
  };
  Tensor loss = weigh(r.h, 11);
  if (use_y) loss = loss + weigh(r.y, 12);
  loss.backward();
  for (const Tensor& t : in) r.grads.push_back(t.grad());
  return r;
}

std::vector<Tensor> gru_inputs(int64_t batch, int64_t steps, int64_t features, int64_t units) {
  return {rand64({batch, steps, features}, 1), rand64({batch, units}, 2) * 0.5,
          rand64({features, 3 * units}, 4) * 0.5, rand64({units, 3 * units}, 5) * 0.5,
          rand64({2, 3 * units}, 6) * 0.5};
}

TEST(CudaGru, CudnnMatchesComposedCells) {
  REQUIRE_CUDA();
  const char* names[] = {"x", "h0", "kernel", "recurrent_kernel", "bias"};
  struct Shape4 {
    int64_t batch, steps, features, units;
  };
  for (const Shape4& s : {Shape4{3, 5, 4, 6}, Shape4{1, 1, 3, 2}, Shape4{7, 12, 9, 16}}) {
    for (bool use_y : {true, false}) {
      SCOPED_TRACE(detail::cat("B=", s.batch, " T=", s.steps, " C=", s.features, " U=", s.units,
                               use_y ? " +y" : ""));
      const auto inputs = gru_inputs(s.batch, s.steps, s.features, s.units);
      const GruRun ref = run(inputs, Device::cpu(), DType::Float64, false, use_y);
      const GruRun got = run(inputs, kGpu, DType::Float32, true, use_y);
      expect_close(ref.y, got.y, 1e-4, "y");
      expect_close(ref.h, got.h, 1e-4, "hT");
      for (int i = 0; i < 5; ++i)
        expect_close(ref.grads[i], got.grads[i], 2e-4, std::string("grad of ") + names[i]);
    }
  }
}

TEST(CudaGru, LayerPathsAgree) {
  REQUIRE_CUDA();
  for (bool go_backwards : {false, true}) {
    nn::GRU cudnn(5, {.return_sequences = true, .go_backwards = go_backwards});
    nn::GRU composed(5, {.return_sequences = true,
                         .go_backwards = go_backwards,
                         .implementation = nn::RecurrentImplementation::Composed});
    const Tensor x = rand64({3, 6, 4}).to(DType::Float32).to(kGpu);
    cudnn.build(x.shape());
    composed.build(x.shape());
    cudnn.to(kGpu);
    composed.to(kGpu);
    NoGradGuard no_grad;
    for (size_t k = 0; k < 3; ++k) {
      cudnn.parameters()[k].copy_(rand64(cudnn.parameters()[k].shape(), 20 + k) * 0.5);
      composed.parameters()[k].copy_(cudnn.parameters()[k]);
    }
    EXPECT_TRUE(cudnn.uses_cudnn(x));
    EXPECT_FALSE(composed.uses_cudnn(x));
    expect_close(composed(x), cudnn(x), 1e-5, go_backwards ? "backwards" : "forwards");
  }
}

TEST(CudaGru, RejectsWhatCudnnCannotDo) {
  REQUIRE_CUDA();
  std::vector<Tensor> in;
  for (const Tensor& t : gru_inputs(2, 3, 4, 5)) in.push_back(t.to(DType::Float32).to(kGpu));
  EXPECT_THROW(dispatch(op("cudnn_gru"), in, LstmAttrs{Activation::Relu, Activation::Sigmoid}),
               UnsupportedError);
  in[4] = zeros({15}, DType::Float32, kGpu);  // a reset_after=False bias
  EXPECT_THROW(dispatch(op("cudnn_gru"), in, LstmAttrs{Activation::Tanh, Activation::Sigmoid}),
               ShapeError);
}

TEST(CudaGru, UnavailableWithoutTheCudaBackend) {
  if (cuda_built()) GTEST_SKIP() << "the CUDA backend defines cudnn_gru";
  std::vector<Tensor> in = gru_inputs(2, 3, 4, 5);
  EXPECT_THROW(dispatch(op("cudnn_gru"), in, LstmAttrs{Activation::Tanh, Activation::Sigmoid}),
               UnsupportedError);
}

}  // namespace
}  // namespace encore
