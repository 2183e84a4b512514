// The CPU's BLAS GEMM, one entry point for every op that calls it (matmul, dense's small
// products, the recurrent kernels' gradients), and what show_config says about the kernels
// behind each GEMM path.
//
// OpenBLAS picks its kernels per CPU when it loads (a DYNAMIC_ARCH build, as Debian's and the
// wheel's), by CPU model: a model newer than the library (0.3.21 and a newer Xeon) fell back to
// its SSE3 "Prescott" kernel, 4-5x slower than its AVX-512 one. libencore re-selects the core
// while it loads (gemm.cpp) from what cpuid says the CPU supports, so C++ programs and the
// Python package get the same kernels.
#pragma once

#include <cstdint>
#include <string>

#include "core/cpu_info.h"

namespace encore::cpu {

/// Row-major C (m, n) = op(A) @ op(B) + beta * C, op(X) = X^T where t*, leading dimensions given.
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc);

/// The ISA level an OpenBLAS core name's kernels use ("Prescott" -> SSE3, "SkylakeX" -> AVX-512).
CpuIsa blas_core_isa(const std::string& core);
/// The ISA level oneDNN's kernels use here (dnnl_get_effective_cpu_isa).
CpuIsa onednn_isa();
/// oneDNN's name for it ("avx512_core_bf16").
std::string onednn_isa_name();

/// What OpenBLAS runs and why: the core, whether encore re-selected it at load (and from what),
/// or why it could not.
struct BlasCore {
  std::string core;      // openblas_get_corename()
  std::string detected;  // the core OpenBLAS chose itself at load
  std::string note;      // why it was kept or changed
};
BlasCore blas_core();

/// show_config's lines: the CPU, then per GEMM path its library, kernel and ISA, then one
/// "warning:" line per library whose kernels are older than the CPU supports.
std::string describe_gemm();

namespace detail {
/// Makes OpenBLAS run `core` (a name OPENBLAS_CORETYPE accepts); false when this OpenBLAS
/// cannot switch (not a DYNAMIC_ARCH build, or no such core in it). For tests.
bool use_blas_core(const std::string& core);
/// The load-time choice again: the newest core the CPU supports when OpenBLAS runs an older
/// one. For tests.
void select_blas_core();
}  // namespace detail

}  // namespace encore::cpu
