// Registration of the CUDA kernels: each family file registers its kernels by op name from a
// static initializer; ops/defs declares the ops themselves.
#pragma once

#include <initializer_list>

#include "ops/registry.h"

namespace encore::cuda {

struct CudaKernel {
  const char* op;
  KernelFn run;
  PrepareFn prepare = nullptr;
};

/// Registers CUDA kernels by op name; returns true (for a static initializer).
inline bool register_cuda_kernels(std::initializer_list<CudaKernel> kernels) {
  for (const CudaKernel& k : kernels) register_kernel(k.op, DeviceType::CUDA, {k.run, k.prepare});
  return true;
}

}  // namespace encore::cuda
