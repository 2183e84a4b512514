// CUDA kernels of the layout conversions (ops/defs/layout.cpp): one thread per blocked entry,
// through the index map the CPU kernels share (ops/layout.h).
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.h"
#include "ops/layout.h"

namespace encore::cuda {
namespace {

template <class T> __global__ void to_blocked(const T* x, T* xb, BlockedGeometry g, int64_t n) {
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = g.nwc_index(e);
    xb[e] = i < 0 ? T(0) : x[i];
  }
}

template <class T> __global__ void from_blocked(const T* xb, T* x, BlockedGeometry g, int64_t n) {
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x)
    if (const int64_t i = g.nwc_index(e); i >= 0) x[i] = xb[e];
}

void to_blocked_kernel(const KernelCtx& c) {
  const OnDevice dev(c);
  const TensorRef &x = c.in[0], &xb = c.out[0];
  const BlockedGeometry g{x.shape[0],   x.shape[1],   x.shape[2],  xb.shape[3],
                          x.strides[0], x.strides[1], x.strides[2]};
  const int64_t n = g.blocked_numel();
  if (n == 0) return;
  visit_float(x.dtype, [&]<class T>() {
    to_blocked<T><<<grid_for(n), kBlock, 0, dev.stream()>>>(x.ptr<const T>(), xb.ptr<T>(), g, n);
  });
  ENCORE_CUDA_LAUNCH_CHECK("to_blocked");
}

void from_blocked_kernel(const KernelCtx& c) {
  const OnDevice dev(c);
  const TensorRef &xb = c.in[0], &x = c.out[0];
  const BlockedGeometry g{x.shape[0],   x.shape[1],   x.shape[2],  xb.shape[3],
                          x.strides[0], x.strides[1], x.strides[2]};
  const int64_t n = g.blocked_numel();
  if (n == 0) return;
  visit_float(x.dtype, [&]<class T>() {
    from_blocked<T><<<grid_for(n), kBlock, 0, dev.stream()>>>(xb.ptr<const T>(), x.ptr<T>(), g, n);
  });
  ENCORE_CUDA_LAUNCH_CHECK("from_blocked");
}

const bool kRegistered = register_cuda_kernels(
    {{"to_blocked", to_blocked_kernel}, {"from_blocked", from_blocked_kernel}});

}  // namespace
}  // namespace encore::cuda
