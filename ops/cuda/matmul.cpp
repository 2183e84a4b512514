// matmul through cuBLAS. Our matrices are row-major; cuBLAS is column-major, and a row-major
// (m, n) matrix read column-major is its transpose. So C = A B is computed as
// C^T = B^T A^T, with each operand passed as it lies in memory (ops/matrix_layout.h has
// already made incompatible views contiguous). Batched operands whose batch offsets form one
// arithmetic progression (broadcast included, as stride 0) run as one strided-batched GEMM;
// others run one GEMM per batch entry.
#include <climits>

#include "ops/cuda/blas.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.h"
#include "ops/matrix_layout.h"

namespace encore::cuda {
namespace {

// The single stride S with offset(p) = p * S over the flattened batch, if there is one.
bool uniform_batch(const MatmulBatch& batch, const int64_t* strides, int64_t& S) {
  S = 0;
  int64_t span = 1;  // elements of the flattened batch covered by the dims seen so far
  bool first = true;
  for (int d = batch.dims - 1; d >= 0; --d) {
    if (batch.size[d] == 1) continue;
    if (first) {
      S = strides[d];
      first = false;
    } else if (strides[d] != S * span) {
      return false;
    }
    span *= batch.size[d];
  }
  return true;
}

template <class T>
void matmul(const TensorRef& a, const TensorRef& b, const TensorRef& y, int device,
            cudaStream_t stream) {
  const int nd = y.shape.size();
  const int64_t m = y.shape[nd - 2], n = y.shape[nd - 1], k = a.shape[a.shape.size() - 1];
  if (m == 0 || n == 0) return;
  if (k == 0) {
    ENCORE_CUDA_CHECK("matmul", cudaMemsetAsync(y.data, 0, y.numel() * sizeof(T), stream));
    return;
  }
  const MatrixLayout la = matrix_layout(a.shape, a.strides), lb = matrix_layout(b.shape, b.strides);
  ENCORE_CHECK(la.ok && lb.ok, ValueError, "[matmul] operands ", a.shape.str(), " and ",
               b.shape.str(), " are views cuBLAS cannot read; make them contiguous first");
  const MatmulBatch batch(a.shape, a.strides, b.shape, b.strides, y.shape);
  const cublasHandle_t h = cublas(device);
  // Column-major: C^T (n x m) = op(B^T) (n x k) * op(A^T) (k x m).
  const cublasOperation_t ob = lb.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t oa = la.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int M = blas_int(n, "matmul"), N = blas_int(m, "matmul"), K = blas_int(k, "matmul");
  const int ldb = blas_int(lb.ld, "matmul"), lda = blas_int(la.ld, "matmul");
  const T* pa = a.ptr<const T>();
  const T* pb = b.ptr<const T>();
  T* pc = y.ptr<T>();
  int64_t ua = 0, ub = 0;
  if (uniform_batch(batch, batch.stride_a, ua) && uniform_batch(batch, batch.stride_b, ub) &&
      batch.count <= INT_MAX) {
    gemm<T>(h, "matmul", ob, oa, M, N, K, pb, ldb, ub, pa, lda, ua, T(0), pc, M, m * n,
            static_cast<int>(batch.count));
    return;
  }
  batch.for_each([&](int64_t p, int64_t off_a, int64_t off_b) {
    gemm<T>(h, "matmul", ob, oa, M, N, K, pb + off_b, ldb, 0, pa + off_a, lda, 0, T(0),
            pc + p * m * n, M, 0, 1);
  });
}

void matmul_kernel(const KernelCtx& c) {
  const OnDevice dev(c);
  visit_float(c.in[0].dtype, [&]<class T>() {
    matmul<T>(c.in[0], c.in[1], c.out[0], dev.device(), dev.stream());
  });
}

}  // namespace

const bool kRegistered = register_cuda_kernels({{"matmul", matmul_kernel}});

}  // namespace encore::cuda
