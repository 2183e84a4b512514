// RAII wrappers for cuDNN descriptors.
#pragma once

#include <cudnn.h>

#include "core/cuda/check.h"

namespace encore::cuda {

template <class T, cudnnStatus_t (*Create)(T*), cudnnStatus_t (*Destroy)(T)> class CudnnDescriptor {
 public:
  CudnnDescriptor() { ENCORE_CUDA_CHECK("cudnn", Create(&d_)); }
  ~CudnnDescriptor() {
    if (d_) (void)Destroy(d_);
  }
  CudnnDescriptor(const CudnnDescriptor&) = delete;
  CudnnDescriptor& operator=(const CudnnDescriptor&) = delete;
  T get() const { return d_; }

 private:
  T d_{};
};

using TensorDescriptor = CudnnDescriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor,
                                         cudnnDestroyTensorDescriptor>;
using FilterDescriptor = CudnnDescriptor<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor,
                                         cudnnDestroyFilterDescriptor>;
using ConvolutionDescriptor =
    CudnnDescriptor<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor,
                    cudnnDestroyConvolutionDescriptor>;
using DropoutDescriptor = CudnnDescriptor<cudnnDropoutDescriptor_t, cudnnCreateDropoutDescriptor,
                                          cudnnDestroyDropoutDescriptor>;
using RnnDescriptor =
    CudnnDescriptor<cudnnRNNDescriptor_t, cudnnCreateRNNDescriptor, cudnnDestroyRNNDescriptor>;
using RnnDataDescriptor = CudnnDescriptor<cudnnRNNDataDescriptor_t, cudnnCreateRNNDataDescriptor,
                                          cudnnDestroyRNNDataDescriptor>;

}  // namespace encore::cuda
