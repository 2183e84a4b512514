// dense: activation(x @ w + b), the Dense layer's step as one op: x (..., K), w (K, N), b (N,).
// Its row, shape inference, backward formula, CPU kernel and public function. The CPU kernel
// has two ways, chosen per shape (measured on the benchmark models' Dense shapes, see
// docs/BENCHMARKS.md): large products run oneDNN's matmul with bias and the activation as
// post-ops (brgemm; 0.5-0.7x the BLAS on (32, 12800) @ (12800, 256) and on 12800 rows), small
// ones the BLAS GEMM, whose call costs ~1 us against oneDNN's ~5 us: per block of rows, bias
// and activation applied right after the block's GEMM, while it is in cache. Either way one
// pass instead of the separate add and activation ops, each a pass over memory and a graph node.
#include <algorithm>
#include <cstring>

#include "ops/cpu/gemm.h"
#include "ops/cpu/onednn.h"
#include "ops/defs/common.h"
#include "ops/epilogue.h"

namespace encore {
namespace {

int infer_dense(const OpDef&, std::span<const Tensor> in, const Attrs& attrs, TensorMeta* out) {
  const Tensor &x = in[0], &w = in[1], &b = in[2];
  defs::require_float("dense", x);
  defs::require_same_dtype("dense", x, w);
  defs::require_same_dtype("dense", x, b);
  ENCORE_CHECK(x.dim() >= 1 && w.dim() == 2 && x.shape().back() == w.shape()[0], ShapeError,
               "[dense] input ", x.shape().str(), " does not match kernel ", w.shape().str(),
               " (expects input (..., features) and kernel (features, units))");
  ENCORE_CHECK(b.dim() == 1 && b.shape()[0] == w.shape()[1], ShapeError, "[dense] bias ",
               b.shape().str(), " does not match the kernel's ", w.shape()[1], " units");
  const Activation a = attrs.as<ActivationAttrs>().activation;
  ENCORE_CHECK(fusable_activation(a), ValueError, "[dense] activation ", name(a),
               " cannot be fused: its gradient is not a function of its output; apply it after "
               "matmul");
  Shape shape = x.shape();
  shape[shape.size() - 1] = w.shape()[1];
  out[0] = defs::meta(shape, x.dtype(), x.device());
  return 1;
}

void bw_dense(const BackwardCtx& c, Tensor* g) {
  const Tensor gy =
      activation_backward(c.attrs.as<ActivationAttrs>().activation, c.grads[0], c.outputs[0]);
  const Tensor& w = c.inputs[1];
  if (c.need(0)) g[0] = matmul(gy, w.transpose(0, 1));
  if (c.need(1)) {
    const int64_t k = w.shape()[0], n = w.shape()[1];
    g[1] = matmul(c.inputs[0].reshape({-1, k}).transpose(0, 1), gy.reshape({-1, n}));
  }
  if (c.need(2)) g[2] = sum(gy.reshape({-1, gy.shape().back()}), {0});
}

// Rows per GEMM block of the BLAS path: each block's output about 256 KiB (a core's L2 holds it
// when the epilogue reads it back), but never fewer than 256 rows, so that the BLAS still gets
// GEMMs large enough to spread over its threads.
int64_t block_rows(int64_t n, size_t item) {
  return std::max<int64_t>(256, (256 << 10) / std::max<int64_t>(1, n * static_cast<int64_t>(item)));
}

// Whether the call runs oneDNN's matmul: a large float32 product.
bool uses_onednn(const KernelCtx& c) {
  const int64_t k = c.in[1].shape[0], n = c.in[1].shape[1], rows = k ? c.in[0].numel() / k : 0;
  return c.in[0].dtype == DType::Float32 && rows != 0 && n != 0 &&
         rows * n * k >= cpu::kOnednnMatmulFrom;
}

// The per-shape setup (the dispatcher's cache): a oneDNN matmul with bias and the activation's
// post-ops for large float32 products, none (the BLAS path) otherwise.
std::shared_ptr<void> prepare(const KernelCtx& c) {
  if (!uses_onednn(c)) return nullptr;
  const int64_t k = c.in[1].shape[0], n = c.in[1].shape[1], rows = c.in[0].numel() / k;
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  return std::make_shared<cpu::PlainMatmul>(
      dnnl::memory::desc({rows, k}, dt::f32, tag::ab), dnnl::memory::desc({k, n}, dt::f32, tag::ab),
      dnnl::memory::desc({1, n}, dt::f32, tag::ab), dnnl::memory::desc({rows, n}, dt::f32, tag::ab),
      cpu::activation_post_ops(c.attrs.as<ActivationAttrs>().activation), "dense");
}

void onednn_dense(const cpu::PlainMatmul& p, const KernelCtx& c) {
  p.run(c.in[0].data, c.in[1].data, c.in[2].data, c.out[0].data);
  const Activation act = c.attrs.as<ActivationAttrs>().activation;
  if (cpu::activation_after_primitive(act)) {
    const int64_t n = c.in[1].shape[1];
    bias_activation(c.out[0].ptr<float>(), nullptr, c.out[0].numel() / n, n, act);
  }
}

void dense_kernel(const KernelCtx& c) {
  if (c.state) return onednn_dense(*static_cast<const cpu::PlainMatmul*>(c.state), c);
  const TensorRef &x = c.in[0], &w = c.in[1], &b = c.in[2], &y = c.out[0];
  const int64_t k = w.shape[0], n = w.shape[1],
                rows = k ? x.numel() / k : y.numel() / std::max<int64_t>(n, 1);
  const Activation act = c.attrs.as<ActivationAttrs>().activation;
  visit_float(x.dtype, [&]<class T>() {
    const int64_t block = block_rows(n, sizeof(T));
    for (int64_t r = 0; r < rows; r += block) {
      const int64_t m = std::min(block, rows - r);
      T* out = y.ptr<T>() + r * n;
      if (k == 0)
        std::memset(out, 0, m * n * sizeof(T));
      else if (n > 0)
        cpu::gemm(false, false, m, n, k, x.ptr<const T>() + r * k, k, w.ptr<const T>(), n, T(0),
                  out, n);
      bias_activation(out, b.ptr<const T>(), m, n, act);
    }
  });
}

OpDef& dense_op = define_op({
    .name = "dense",
    .min_inputs = 3,
    .max_inputs = 3,
    .save = Save::Inputs | Save::Outputs,
    .contiguous_inputs = true,
    .attrs = &attrs_of<ActivationAttrs>,
    .infer = infer_dense,
    .backward = bw_dense,
    .cpu = {dense_kernel, prepare, nullptr, uses_onednn},
    .signature = "dense(x: Tensor, w: Tensor, b: Tensor, activation: str = 'linear') -> Tensor",
    .invoke = [](const CallArgs& a) -> Outputs {
      return {dense(a.tensor(0), a.tensor(1), a.tensor(2), parse_activation(a.string(3)))};
    },
    .doc =
        "activation(x @ w + b) in one kernel (x: (..., features), w: (features, units), b: "
        "(units,)): "
        "on the CPU oneDNN's matmul with post-ops for large products, else the BLAS GEMM with bias "
        "and activation applied to each block of output rows while it is in cache",
    .examples = {{.inputs = {{{2, 3, 4}}, {{4, 5}}, {{5}}}, .args = "activation='tanh'"},
                 {.inputs = {{{4}}, {{4, 3}}, {{3}}}, .args = "activation='sigmoid'"},  // a 1-D x
                 {.inputs = {{{0, 4}}, {{4, 3}}, {{3}}}}},
});

}  // namespace

Tensor dense(const Tensor& x, const Tensor& w, const Tensor& b, Activation activation) {
  ENCORE_CHECK(x.defined() && w.defined() && b.defined(), ValueError, "[dense] undefined operand");
  return call(dense_op, {x, w, b}, ActivationAttrs{activation});
}

}  // namespace encore
