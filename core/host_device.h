// ENCORE_HD marks the small functions (index formulas, elementwise math) that the CPU kernels
// and the CUDA kernels share: __host__ __device__ under nvcc, plain inline elsewhere.
#pragma once

#include "core/cxx20.h"

#if defined(__CUDACC__)
#define ENCORE_HD __host__ __device__ __forceinline__
#else
#define ENCORE_HD inline
#endif
