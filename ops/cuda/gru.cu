// The fused GRU cell and its backward on CUDA (the math: ops/gru_math.h).
#include "ops/cuda/device/vector.cuh"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.h"
#include "ops/gru_math.h"
#include "ops/nn.h"

namespace encore::cuda {
namespace {

template <class T>
__global__ void gru_cell_kernel(const T* __restrict__ xz, const T* __restrict__ hz,
                                const T* __restrict__ h_prev, T* __restrict__ h, int64_t batch,
                                int64_t units, Activation act, Activation rec) {
  for (int64_t k = thread_index(); k < batch * units; k += thread_count())
    gru_cell_unit(xz, hz, h_prev, h, k / units, k % units, units, act, rec);
}

template <class T>
__global__ void gru_cell_backward_kernel(const T* __restrict__ xz, const T* __restrict__ hz,
                                         const T* __restrict__ h_prev, const T* __restrict__ gh,
                                         T* __restrict__ gxz, T* __restrict__ ghz,
                                         T* __restrict__ gh_prev, int64_t batch, int64_t units,
                                         Activation act, Activation rec) {
  for (int64_t k = thread_index(); k < batch * units; k += thread_count())
    gru_cell_backward_unit(xz, hz, h_prev, gh, gxz, ghz, gh_prev, k / units, k % units, units, act,
                           rec);
}

void gru_cell(const KernelCtx& c) {
  const OnDevice dev(c);
  const auto& a = c.attrs.as<LstmAttrs>();
  const int64_t batch = c.in[2].shape[0], units = c.in[2].shape[1];
  if (batch * units == 0) return;
  visit_float(c.in[0].dtype, [&]<class T>() {
    gru_cell_kernel<T><<<grid_for(batch * units), kBlock, 0, dev.stream()>>>(
        c.in[0].ptr<const T>(), c.in[1].ptr<const T>(), c.in[2].ptr<const T>(), c.out[0].ptr<T>(),
        batch, units, a.activation, a.recurrent_activation);
  });
  ENCORE_CUDA_LAUNCH_CHECK("gru_cell");
}

void gru_cell_backward(const KernelCtx& c) {
  const OnDevice dev(c);
  const auto& a = c.attrs.as<LstmAttrs>();
  const int64_t batch = c.in[2].shape[0], units = c.in[2].shape[1];
  if (batch * units == 0) return;
  visit_float(c.in[0].dtype, [&]<class T>() {
    gru_cell_backward_kernel<T><<<grid_for(batch * units), kBlock, 0, dev.stream()>>>(
        c.in[0].ptr<const T>(), c.in[1].ptr<const T>(), c.in[2].ptr<const T>(),
        c.in[3].ptr<const T>(), c.out[0].ptr<T>(), c.out[1].ptr<T>(), c.out[2].ptr<T>(), batch,
        units, a.activation, a.recurrent_activation);
  });
  ENCORE_CUDA_LAUNCH_CHECK("gru_cell_backward");
}

const bool kRegistered = register_cuda_kernels({
    {"gru_cell", gru_cell},
    {"gru_cell_backward", gru_cell_backward},
});

}  // namespace
}  // namespace encore::cuda
