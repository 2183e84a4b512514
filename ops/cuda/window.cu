// CUDA kernel of the window family (ops/defs/window.cpp): the gradient of unfold's windows,
// one thread per input entry summing the entries of the windows that read it, in the order
// the CPU kernel sums them.
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.h"
#include "ops/window.h"

namespace encore::cuda {
namespace {

// g: (outer, windows, inner, size) contiguous -> out: (outer, length, inner).
template <class T, class Index>
__global__ void unfold_backward(const T* g, T* out, WindowGeometry w, Index length, Index inner,
                                Index n) {
  const Index stride = static_cast<Index>(gridDim.x) * blockDim.x;
  for (Index e = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += stride) {
    const Index j = e % inner, i = e / inner % length, o = e / inner / length;
    T sum = 0;
    for (int64_t k = 0; k < w.size; ++k) {
      const int64_t win = w.window_of(static_cast<int64_t>(i), k);
      if (win >= 0)
        sum += g[((static_cast<int64_t>(o) * w.windows + win) * inner + j) * w.size + k];
    }
    out[e] = sum;
  }
}

void unfold_backward_kernel(const KernelCtx& c) {
  const OnDevice dev(c);
  const auto& a = c.attrs.as<UnfoldAttrs>();
  const TensorRef &g = c.in[0], &out = c.out[0];
  const int64_t n = out.numel();
  if (n == 0) return;
  int64_t inner = 1;
  for (int d = a.axis + 1; d < out.shape.size(); ++d) inner *= out.shape[d];
  const WindowGeometry w{g.shape[a.axis], a.size, a.step};
  visit_float(g.dtype, [&]<class T>() {
    if (small_index(n))
      unfold_backward<T, uint32_t><<<grid_for(n), kBlock, 0, dev.stream()>>>(
          g.ptr<const T>(), out.ptr<T>(), w, static_cast<uint32_t>(a.length),
          static_cast<uint32_t>(inner), static_cast<uint32_t>(n));
    else
      unfold_backward<T, uint64_t><<<grid_for(n), kBlock, 0, dev.stream()>>>(
          g.ptr<const T>(), out.ptr<T>(), w, static_cast<uint64_t>(a.length),
          static_cast<uint64_t>(inner), static_cast<uint64_t>(n));
  });
  ENCORE_CUDA_LAUNCH_CHECK("unfold_backward");
}

const bool kRegistered = register_cuda_kernels({{"unfold_backward", unfold_backward_kernel}});

}  // namespace
}  // namespace encore::cuda
