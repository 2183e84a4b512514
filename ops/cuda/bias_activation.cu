// The epilogue of conv1d_fused on the GPU: y = activation(y + b) over (rows, filters), after
// the cuDNN (or float64 direct) convolution, with the CPU's functors.
#include "ops/activation.h"
#include "ops/cuda/conv1d.h"
#include "ops/cuda/launch.h"

namespace encore::cuda {
namespace {

template <class T>
__global__ void bias_activation_kernel(T* y, const T* b, int64_t filters, Activation a, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += stride)
    y[e] = fn::activate(a, y[e] + b[e % filters]);
}

}  // namespace

template <class T>
void bias_activation(T* y, const T* b, int64_t rows, int64_t filters, Activation a,
                     cudaStream_t stream) {
  const int64_t n = rows * filters;
  if (n == 0) return;
  bias_activation_kernel<T><<<grid_for(n), kBlock, 0, stream>>>(y, b, filters, a, n);
  ENCORE_CUDA_LAUNCH_CHECK("conv1d_fused");
}

template void bias_activation<float>(float*, const float*, int64_t, int64_t, Activation,
                                     cudaStream_t);
template void bias_activation<double>(double*, const double*, int64_t, int64_t, Activation,
                                      cudaStream_t);

}  // namespace encore::cuda
