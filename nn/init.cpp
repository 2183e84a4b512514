#include "nn/init.h"

#include <cmath>

#include "ops/ops.h"

extern "C" {
// LAPACK (shipped inside OpenBLAS): Householder QR and the explicit Q.
void dgeqrf_(const int* m, const int* n, double* a, const int* lda, double* tau, double* work,
             const int* lwork, int* info);
void dorgqr_(const int* m, const int* n, const int* k, double* a, const int* lda, const double* tau,
             double* work, const int* lwork, int* info);
}

namespace encore::nn::init {

Tensor glorot_uniform(const Shape& shape, int64_t fan_in, int64_t fan_out, Generator* gen) {
  const double limit = std::sqrt(6.0 / static_cast<double>(std::max<int64_t>(fan_in + fan_out, 1)));
  return uniform(shape, -limit, limit, DType::Float32, Device::cpu(), gen);
}

Tensor orthogonal(int64_t rows, int64_t cols, Generator* gen) {
  checked_numel({rows, cols}, "orthogonal");
  ENCORE_CHECK(std::max(rows, cols) <= INT32_MAX, ShapeError, "[orthogonal] (", rows, ", ", cols,
               ") is too large for LAPACK's int sizes");
  // QR needs m >= n: factor the taller orientation and transpose back if needed.
  const bool transpose = rows < cols;
  const int m = static_cast<int>(transpose ? cols : rows),
            n = static_cast<int>(transpose ? rows : cols);
  // Column-major m x n for LAPACK: the row-major (n, m) Gaussian read as column-major.
  std::vector<double> a =
      normal({n, m}, 0.0, 1.0, DType::Float64, Device::cpu(), gen).to_vector<double>();
  std::vector<double> tau(n), work(1);
  int info = 0, lwork = -1;
  dgeqrf_(&m, &n, a.data(), &m, tau.data(), work.data(), &lwork, &info);
  lwork = static_cast<int>(work[0]);
  work.resize(lwork);
  dgeqrf_(&m, &n, a.data(), &m, tau.data(), work.data(), &lwork, &info);
  ENCORE_CHECK(info == 0, BackendError, "[orthogonal] LAPACK dgeqrf failed with info ", info);
  std::vector<double> diag(n);
  for (int j = 0; j < n; ++j) diag[j] = a[static_cast<size_t>(j) * m + j];
  lwork = -1;
  dorgqr_(&m, &n, &n, a.data(), &m, tau.data(), work.data(), &lwork, &info);
  lwork = static_cast<int>(work[0]);
  work.resize(lwork);
  dorgqr_(&m, &n, &n, a.data(), &m, tau.data(), work.data(), &lwork, &info);
  ENCORE_CHECK(info == 0, BackendError, "[orthogonal] LAPACK dorgqr failed with info ", info);
  // q (m x n, column-major) with column j scaled by sign(r_jj).
  std::vector<float> out(static_cast<size_t>(rows * cols));
  for (int j = 0; j < n; ++j) {
    const double s = diag[j] < 0 ? -1.0 : 1.0;
    for (int i = 0; i < m; ++i) {
      const float v = static_cast<float>(s * a[static_cast<size_t>(j) * m + i]);
      // q[i][j]: row-major (rows, cols) result is q itself, or q^T when we transposed.
      if (transpose)
        out[j * cols + i] = v;
      else
        out[i * cols + j] = v;
    }
  }
  return from_vector(out, {rows, cols});
}

}  // namespace encore::nn::init
