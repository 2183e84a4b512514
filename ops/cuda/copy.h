// Strided copies on the GPU, shared by the data-movement kernels, transfers and conv1d.
#pragma once

#include <cuda_runtime_api.h>

#include "ops/registry.h"
#include "ops/strided.h"

namespace encore::cuda {

/// dst = src elementwise (same dtype; src broadcast to dst's shape; any strides, including
/// negative ones). A dense same-size copy is one cudaMemcpyAsync.
void strided_copy(const TensorRef& dst, const TensorRef& src, cudaStream_t stream, const char* op);

using encore::sub_view;

}  // namespace encore::cuda
