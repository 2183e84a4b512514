// Internal to the CUDA conv1d kernels: the float64 direct convolutions (cuDNN's NHWC
// convolutions are float32; float64 on the GPU serves references and gradchecks).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "ops/conv.h"

namespace encore::cuda {

template <class T>
void conv1d_direct(const ConvGeometry& s, const T* x, const T* w, T* y, cudaStream_t stream);
template <class T>
void conv1d_backward_data_direct(const ConvGeometry& s, const T* gy, const T* w, T* gx,
                                 cudaStream_t stream);
/// The epilogue of conv1d_fused and dense: y = activation(y + b) over (rows, filters), in place.
template <class T>
void bias_activation(T* y, const T* b, int64_t rows, int64_t filters, Activation a,
                     cudaStream_t stream);
template <class T>
void conv1d_backward_filter_direct(const ConvGeometry& s, const T* x, const T* gy, T* gw,
                                   cudaStream_t stream);

}  // namespace encore::cuda
