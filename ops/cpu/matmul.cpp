// matmul through CBLAS (OpenBLAS): one GEMM per batch entry, operands passed as strided
// views (the API has already made incompatible views contiguous).
#include <cblas.h>

#include <cstring>

#include "ops/cpu/kernels.h"
#include "ops/matrix_layout.h"

namespace encore::cpu {
namespace {

template <class T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
          int64_t ldb, T* c, int64_t ldc) {
  const auto tra = ta ? CblasTrans : CblasNoTrans, trb = tb ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, tra, trb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
  else
    cblas_dgemm(CblasRowMajor, tra, trb, m, n, k, 1.0, a, lda, b, ldb, 0.0, c, ldc);
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
    gemm<T>(la.transposed, lb.transposed, m, n, k, a.ptr<const T>() + off_a, la.ld,
            b.ptr<const T>() + off_b, lb.ld, y.ptr<T>() + p * m * n, n);
  });
}

void matmul_kernel(const KernelCtx& c) {
  visit_float(c.in[0].dtype, [&]<class T>() { matmul<T>(c.in[0], c.in[1], c.out[0]); });
}

}  // namespace

void register_matmul() { set_kernel(OpId::matmul, matmul_kernel); }

}  // namespace encore::cpu
