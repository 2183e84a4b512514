// CUDA kernels of reverse_sequence and mask_sequence (ops/defs/sequence.cpp): one thread per
// output entry, with the index formulas of ops/sequence.h.
#include "ops/cuda/device/vector.cuh"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.h"
#include "ops/sequence.h"

namespace encore::cuda {
namespace {

// x, y: (outer, n, after) contiguous; lengths: (1,) or one per row of axis 0.
template <bool Reverse, class T, class I>
__global__ void sequence_kernel_impl(const T* __restrict__ x, const I* __restrict__ lengths,
                                     T* __restrict__ y, int64_t outer, int64_t n, int64_t after,
                                     int64_t batch, int64_t count, T fill) {
  const int64_t total = outer * n * after;
  for (int64_t e = thread_index(); e < total; e += thread_count()) {
    const int64_t k = e % after, j = e / after % n, o = e / after / n;
    const int64_t l = seq::clamp_length(
        static_cast<int64_t>(lengths[seq::length_row(o, outer, batch, count)]), n);
    if constexpr (Reverse)
      y[e] = x[(o * n + seq::reversed_source(j, l)) * after + k];
    else
      y[e] = j < l ? x[e] : fill;
  }
}

template <bool Reverse> void sequence_kernel(const KernelCtx& c) {
  const OnDevice dev(c);
  const TensorRef &x = c.in[0], &len = c.in[1];
  const int axis = c.attrs.as<SequenceAttrs>().axis;
  const int64_t n = x.shape[axis];
  int64_t outer = 1, after = 1;
  for (int d = 0; d < axis; ++d) outer *= x.shape[d];
  for (int d = axis + 1; d < x.shape.size(); ++d) after *= x.shape[d];
  if (x.numel() == 0) return;
  visit_dtype(x.dtype, [&]<class T>() {
    auto run = [&]<class I>() {
      sequence_kernel_impl<Reverse, T, I><<<grid_for(x.numel()), kBlock, 0, dev.stream()>>>(
          x.ptr<const T>(), len.ptr<const I>(), c.out[0].ptr<T>(), outer, n, after, x.shape[0],
          len.numel(), static_cast<T>(c.attrs.as<SequenceAttrs>().value));
      ENCORE_CUDA_LAUNCH_CHECK(c.op);
    };
    if (len.dtype == DType::Int32)
      run.template operator()<int32_t>();
    else
      run.template operator()<int64_t>();
  });
}

const bool kRegistered = register_cuda_kernels({
    {"reverse_sequence", sequence_kernel<true>},
    {"mask_sequence", sequence_kernel<false>},
});

}  // namespace
}  // namespace encore::cuda
