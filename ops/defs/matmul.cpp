// matmul: (..., M, K) @ (..., K, N) with broadcast batch dims. Its row, shape inference,
// backward formula, CPU kernel (one CBLAS GEMM per batch entry, operands passed as strided
// views: the public function has already made incompatible views contiguous; a large float32
// product without batch dims runs oneDNN's matmul, prepared per shape) and the public function
// (1-D operands as in NumPy).
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>

#include "ops/cpu/gemm.h"
#include "ops/cpu/onednn.h"
#include "ops/defs/common.h"
#include "ops/matrix_layout.h"

namespace encore {
namespace {

int infer_matmul(const OpDef&, std::span<const Tensor> in, const Attrs&, TensorMeta* out) {
  const Tensor &a = in[0], &b = in[1];
  defs::require_float("matmul", a);
  defs::require_same_dtype("matmul", a, b);
  ENCORE_CHECK(a.dim() >= 2 && b.dim() >= 2, ShapeError,
               "[matmul] needs operands of rank >= 2, got ", a.shape().str(), " and ",
               b.shape().str());
  const int64_t k = a.shape().back(), k2 = b.shape()[b.dim() - 2];
  ENCORE_CHECK(k == k2, ShapeError, "[matmul] ", a.shape().str(), " @ ", b.shape().str(),
               ": inner dimensions differ (", k, " vs ", k2, ")");
  Shape ba(std::span<const int64_t>(a.shape().begin(), a.dim() - 2));
  Shape bb(std::span<const int64_t>(b.shape().begin(), b.dim() - 2));
  Shape shape = broadcast_shapes(ba, bb, "matmul");
  shape.push_back(a.shape()[a.dim() - 2]);
  shape.push_back(b.shape().back());
  out[0] = defs::meta(shape, a.dtype(), a.device());
  return 1;
}

void bw_matmul(const BackwardCtx& c, Tensor* g) {
  const Tensor &a = c.inputs[0], &b = c.inputs[1];
  if (c.need(0)) g[0] = sum_to(matmul(c.grads[0], b.transpose(-1, -2)), c.input_shape(0));
  if (c.need(1)) g[1] = sum_to(matmul(a.transpose(-1, -2), c.grads[0]), c.input_shape(1));
}

template <class T> void matmul(const TensorRef& a, const TensorRef& b, const TensorRef& y) {
  const int nd = y.shape.size();
  const int64_t m = y.shape[nd - 2], n = y.shape[nd - 1], k = a.shape[a.shape.size() - 1];
  if (m == 0 || n == 0) return;
  if (k == 0) {
    std::memset(y.data, 0, y.numel() * sizeof(T));
    return;
  }
  const MatrixLayout la = matrix_layout(a.shape, a.strides), lb = matrix_layout(b.shape, b.strides);
  const MatmulBatch batch(a.shape, a.strides, b.shape, b.strides, y.shape);
  batch.for_each([&](int64_t p, int64_t off_a, int64_t off_b) {
    cpu::gemm(la.transposed, lb.transposed, m, n, k, a.ptr<const T>() + off_a, la.ld,
              b.ptr<const T>() + off_b, lb.ld, T(0), y.ptr<T>() + p * m * n, n);
  });
}

// The operand as oneDNN reads it: rows x cols with the view's strides (a transposed view too).
dnnl::memory::desc matrix_desc(const TensorRef& t) {
  const int nd = t.shape.size();
  return dnnl::memory::desc({t.shape[nd - 2], t.shape[nd - 1]}, dnnl::memory::data_type::f32,
                            dnnl::memory::dims{t.strides[nd - 2], t.strides[nd - 1]});
}

// Whether the call runs oneDNN's matmul: a large float32 product of two matrices.
bool uses_onednn(const KernelCtx& c) {
  const TensorRef &a = c.in[0], &b = c.in[1];
  if (a.dtype != DType::Float32 || a.shape.size() != 2 || b.shape.size() != 2) return false;
  const int64_t m = a.shape[0], k = a.shape[1], n = b.shape[1];
  return m != 0 && n != 0 && k != 0 && m * n * k >= cpu::kOnednnMatmulFrom;
}

// The per-shape setup (the dispatcher's cache, keyed by shapes and strides): a oneDNN matmul for
// a large float32 product of two matrices, none (the BLAS path) otherwise.
std::shared_ptr<void> prepare(const KernelCtx& c) {
  if (!uses_onednn(c)) return nullptr;
  return std::make_shared<cpu::PlainMatmul>(matrix_desc(c.in[0]), matrix_desc(c.in[1]),
                                            dnnl::memory::desc(), matrix_desc(c.out[0]),
                                            dnnl::post_ops(), "matmul");
}

void matmul_kernel(const KernelCtx& c) {
  if (c.state)
    return static_cast<const cpu::PlainMatmul*>(c.state)->run(c.in[0].data, c.in[1].data, nullptr,
                                                              c.out[0].data);
  visit_float(c.in[0].dtype, [&]<class T>() { matmul<T>(c.in[0], c.in[1], c.out[0]); });
}

OpDef& matmul_op = define_op({
    .name = "matmul",
    .min_inputs = 2,
    .max_inputs = 2,
    .save = Save::Inputs,
    .infer = infer_matmul,
    .backward = bw_matmul,
    .cpu = {matmul_kernel, prepare, nullptr, uses_onednn},
    .signature = "matmul(a: Tensor, b: Tensor) -> Tensor",
    .invoke = [](const CallArgs& a) -> Outputs { return {matmul(a.tensor(0), a.tensor(1))}; },
    .method = true,
    .examples = {{.inputs = {{{2, 3, 4}}, {{4, 5}}}},
                 {.inputs = {{{2, 1, 3, 4}}, {{3, 4, 2}}}},  // batch dims broadcast both ways
                 {.inputs = {{{4}}, {{4, 5}}}},              // 1-D operands, as NumPy
                 {.inputs = {{{2, 3, 4}}, {{4}}}},
                 {.inputs = {{{0, 3, 4}}, {{4, 2}}}}},
});

Tensor blas_ready(const Tensor& t) {
  return matrix_layout(t.shape(), t.strides()).ok ? t : t.contiguous();
}

}  // namespace

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  ENCORE_CHECK(a_in.defined() && b_in.defined(), ValueError, "[matmul] undefined operand");
  ENCORE_CHECK(a_in.dim() >= 1 && b_in.dim() >= 1, ShapeError,
               "[matmul] operands must have rank >= 1, got ", a_in.shape().str(), " and ",
               b_in.shape().str());
  Tensor a = a_in.dim() == 1 ? a_in.unsqueeze(0) : a_in;
  Tensor b = b_in.dim() == 1 ? b_in.unsqueeze(-1) : b_in;
  a = blas_ready(a);
  b = blas_ready(b);
  Tensor out;
  // (..., M, K) @ (K, N): one GEMM over all rows when the leading dims fold into M.
  if (b.dim() == 2 && a.dim() > 2) {
    const int64_t k = a.shape().back();
    const Shape rows{a.numel() / std::max<int64_t>(k, 1), k};
    Strides st;
    if (k > 0 && view_strides(a.shape(), a.strides(), rows, st) && matrix_layout(rows, st).ok) {
      Shape out_shape = a.shape();
      out_shape[out_shape.size() - 1] = b.shape()[1];
      out = call(matmul_op, {a.reshape(rows), b}).reshape(out_shape);
    }
  }
  if (!out.defined()) out = call(matmul_op, {a, b});
  if (a_in.dim() == 1) out = out.squeeze(-2);
  if (b_in.dim() == 1) out = out.squeeze(-1);
  return out;
}

}  // namespace encore
