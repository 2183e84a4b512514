// The one cuBLAS GEMM call of the CUDA kernels (matmul, the recurrent sequence ops).
#pragma once

#include <climits>
#include <cstdint>
#include <type_traits>

#include <cublas_v2.h>

#include "core/cuda/check.h"
#include "core/error.h"
#include "core/modes.h"

namespace encore::cuda {

inline int blas_int(int64_t v, const char* op) {
  ENCORE_CHECK(v <= INT_MAX, UnsupportedError, "[", op, "] size ", v,
               " exceeds cuBLAS's 32-bit limit");
  return static_cast<int>(v);
}

/// Column-major C = op(A) op(B) + beta C over `batch` matrices `s*` elements apart. The precision
/// goes with the call (its compute type, TF32 when allowed for float), not into the handle's math
/// mode: a handle keeps its settings, and the capture handle serves every traced function.
template <class T>
void gemm(cublasHandle_t h, const char* op, cublasOperation_t ta, cublasOperation_t tb, int m,
          int n, int k, const T* a, int lda, long long sa, const T* b, int ldb, long long sb,
          T beta, T* c, int ldc, long long sc, int batch) {
  const T one = 1;
  constexpr bool is_float = std::is_same_v<T, float>;
  const cudaDataType_t type = is_float ? CUDA_R_32F : CUDA_R_64F;
  const cublasComputeType_t compute = !is_float      ? CUBLAS_COMPUTE_64F
                                      : allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                     : CUBLAS_COMPUTE_32F;
  ENCORE_CUDA_CHECK(
      op, cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, &one, a, type, lda, sa, b, type, ldb, sb,
                                     &beta, c, type, ldc, sc, batch, compute, CUBLAS_GEMM_DEFAULT));
}

}  // namespace encore::cuda
