// The CPU's BLAS GEMM, one entry point for every op that calls it (matmul, dense's small
// products, the recurrent kernels' gradients), and what show_config says about the kernels
// behind each GEMM path.
//
// Which kernels OpenBLAS and oneDNN run, and the load-time re-selection of OpenBLAS's core:
// core/cpu_info.h.
#pragma once

#include <cstdint>
#include <string>

namespace encore::cpu {

/// Row-major C (m, n) = op(A) @ op(B) + beta * C, op(X) = X^T where t*, leading dimensions given.
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc);

/// show_config's lines: the CPU, then per GEMM path its library, kernel and ISA, then one
/// "warning:" line per library whose kernels are older than the CPU supports.
std::string describe_gemm();

}  // namespace encore::cpu
