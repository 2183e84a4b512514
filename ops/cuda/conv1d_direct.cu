// Direct 1-D convolutions, one thread per output element, for dtypes cuDNN's channels-last
// convolutions do not take (float64). The index formula is ConvGeometry's (ops/conv.h), shared
// with the CPU reference kernels.
#include "ops/cuda/conv1d.h"
#include "ops/cuda/device/vector.cuh"
#include "ops/cuda/launch.h"

namespace encore::cuda {
namespace {

template <class T>
__global__ void forward(ConvGeometry s, const T* __restrict__ x, const T* __restrict__ w,
                        T* __restrict__ y) {
  const int64_t total = s.n * s.out_length * s.filters;
  for (int64_t e = thread_index(); e < total; e += thread_count()) {
    const int64_t f = e % s.filters, t = e / s.filters % s.out_length,
                  n = e / (s.filters * s.out_length);
    T acc = T(0);
    for (int64_t k = 0; k < s.kernel; ++k) {
      const int64_t i = s.input_step(t, k);
      if (i < 0 || i >= s.length) continue;
      const T* xr = x + (n * s.length + i) * s.channels;
      const T* wr = w + k * s.channels * s.filters + f;
      for (int64_t c = 0; c < s.channels; ++c) acc += xr[c] * wr[c * s.filters];
    }
    y[e] = acc;
  }
}

template <class T>
__global__ void backward_data(ConvGeometry s, const T* __restrict__ gy, const T* __restrict__ w,
                              T* __restrict__ gx) {
  const int64_t total = s.n * s.length * s.channels;
  for (int64_t e = thread_index(); e < total; e += thread_count()) {
    const int64_t c = e % s.channels, i = e / s.channels % s.length,
                  n = e / (s.channels * s.length);
    T acc = T(0);
    for (int64_t k = 0; k < s.kernel; ++k) {
      const int64_t t = s.output_step(i, k);
      if (t < 0) continue;
      const T* gr = gy + (n * s.out_length + t) * s.filters;
      const T* wr = w + (k * s.channels + c) * s.filters;
      for (int64_t f = 0; f < s.filters; ++f) acc += gr[f] * wr[f];
    }
    gx[e] = acc;
  }
}

template <class T>
__global__ void backward_filter(ConvGeometry s, const T* __restrict__ x, const T* __restrict__ gy,
                                T* __restrict__ gw) {
  const int64_t total = s.kernel * s.channels * s.filters;
  for (int64_t e = thread_index(); e < total; e += thread_count()) {
    const int64_t f = e % s.filters, c = e / s.filters % s.channels,
                  k = e / (s.filters * s.channels);
    T acc = T(0);
    for (int64_t n = 0; n < s.n; ++n)
      for (int64_t t = 0; t < s.out_length; ++t) {
        const int64_t i = s.input_step(t, k);
        if (i < 0 || i >= s.length) continue;
        acc += x[(n * s.length + i) * s.channels + c] * gy[(n * s.out_length + t) * s.filters + f];
      }
    gw[e] = acc;
  }
}

}  // namespace

template <class T>
void conv1d_direct(const ConvGeometry& s, const T* x, const T* w, T* y, cudaStream_t stream) {
  const int64_t total = s.n * s.out_length * s.filters;
  if (total == 0) return;
  forward<T><<<grid_for(total), kBlock, 0, stream>>>(s, x, w, y);
  ENCORE_CUDA_LAUNCH_CHECK("conv1d");
}

template <class T>
void conv1d_backward_data_direct(const ConvGeometry& s, const T* gy, const T* w, T* gx,
                                 cudaStream_t stream) {
  const int64_t total = s.n * s.length * s.channels;
  if (total == 0) return;
  backward_data<T><<<grid_for(total), kBlock, 0, stream>>>(s, gy, w, gx);
  ENCORE_CUDA_LAUNCH_CHECK("conv1d_backward_data");
}

template <class T>
void conv1d_backward_filter_direct(const ConvGeometry& s, const T* x, const T* gy, T* gw,
                                   cudaStream_t stream) {
  const int64_t total = s.kernel * s.channels * s.filters;
  if (total == 0) return;
  backward_filter<T><<<grid_for(total), kBlock, 0, stream>>>(s, x, gy, gw);
  ENCORE_CUDA_LAUNCH_CHECK("conv1d_backward_filter");
}

template void conv1d_direct<double>(const ConvGeometry&, const double*, const double*, double*,
                                    cudaStream_t);
template void conv1d_backward_data_direct<double>(const ConvGeometry&, const double*, const double*,
                                                  double*, cudaStream_t);
template void conv1d_backward_filter_direct<double>(const ConvGeometry&, const double*,
                                                    const double*, double*, cudaStream_t);

}  // namespace encore::cuda
