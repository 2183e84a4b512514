// dense through cuBLAS: one GEMM over all rows, then the bias-and-activation kernel that
// conv1d_fused's epilogue uses (the CPU's functors). Row-major Y (rows, N) = X (rows, K) W (K, N)
// is computed column-major as Y^T = W^T X^T, each operand passed as it lies in memory.
#include <algorithm>

#include "ops/cuda/blas.h"
#include "ops/cuda/conv1d.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.h"
#include "ops/epilogue.h"

namespace encore::cuda {
namespace {

void dense_kernel(const KernelCtx& c) {
  const OnDevice dev(c);
  const TensorRef &x = c.in[0], &w = c.in[1], &b = c.in[2], &y = c.out[0];
  const int64_t k = w.shape[0], n = w.shape[1], rows = y.numel() / std::max<int64_t>(n, 1);
  if (rows == 0 || n == 0) return;
  visit_float(x.dtype, [&]<class T>() {
    if (k == 0) {
      ENCORE_CUDA_CHECK("dense", cudaMemsetAsync(y.data, 0, y.numel() * sizeof(T), dev.stream()));
    } else {
      const int N = blas_int(n, "dense"), M = blas_int(rows, "dense"), K = blas_int(k, "dense");
      gemm<T>(cublas(dev.device()), "dense", CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, w.ptr<const T>(), N,
              0, x.ptr<const T>(), K, 0, T(0), y.ptr<T>(), N, 0, 1);
    }
    bias_activation(y.ptr<T>(), b.ptr<const T>(), rows, n, c.attrs.as<ActivationAttrs>().activation,
                    dev.stream());
  });
}

}  // namespace

const bool kRegistered = register_cuda_kernels({{"dense", dense_kernel}});

}  // namespace encore::cuda
