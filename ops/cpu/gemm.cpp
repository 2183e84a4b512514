#include "ops/cpu/gemm.h"

#include <cblas.h>

#include <iomanip>
#include <sstream>

#include "core/cpu_info.h"

namespace encore::cpu {

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
              k, 1.0f, a, lda, b, ldb, beta, c, ldc);
}

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
              k, 1.0, a, lda, b, ldb, beta, c, ldc);
}

std::string describe_gemm() {
  const CpuInfo& cpu = cpu_info();
  const BlasCore blas = blas_core();
  const CpuIsa blas_isa = blas_core_isa(blas.core), dnnl_isa = onednn_isa();
  std::ostringstream out;
  out << "  CPU: " << cpu.model << " (" << name(cpu.isa) << "), float32 FMA peak "
      << static_cast<int>(cpu.peak_gflops(1) + 0.5) << " GFLOP/s per core (" << cpu.peak_basis
      << " at " << std::setprecision(3) << cpu_clock_ghz() << " GHz: measured "
      << measured_cpu_clock_ghz() << ", /proc/cpuinfo " << cpu.nominal_ghz << ")\n"
      << "  GEMM, OpenBLAS core " << blas.core << " (" << name(blas_isa) << "; " << blas.note
      << "): matmul and dense below 2^20 multiply-adds, batched matmul, recurrent kernels' "
         "gradients, float64\n"
      << "  GEMM, oneDNN " << onednn_isa_name() << " (" << name(dnnl_isa)
      << "): matmul of two matrices and dense from 2^20 multiply-adds, recurrent steps, Conv1D "
         "(its gradients' tap-block GEMMs too)\n";
  if (blas_isa < cpu.isa)
    out << "  warning: OpenBLAS runs its " << blas.core << " kernels (" << name(blas_isa)
        << ") on a CPU with " << name(cpu.isa) << " (" << blas.note << ")\n";
  if (dnnl_isa < cpu.isa)
    out << "  warning: oneDNN runs " << onednn_isa_name() << " kernels on a CPU with "
        << name(cpu.isa) << " (ONEDNN_MAX_CPU_ISA, or a oneDNN older than the CPU)\n";
  return out.str();
}

}  // namespace encore::cpu
