// Registration of the CPU kernels, one function per op family.
#pragma once

#include "ops/registry.h"

namespace encore::cpu {

inline void set_kernel(OpId op, KernelFn kernel, PrepareFn prepare = nullptr) {
  OpDef& def = mutable_op_def(op);
  def.kernel[static_cast<int>(DeviceType::CPU)] = kernel;
  def.prepare[static_cast<int>(DeviceType::CPU)] = prepare;
}

void register_elementwise();
void register_reduce();
void register_data();
void register_matmul();
void register_conv1d();
void register_nn();
void register_creation();
void register_optim();

inline void register_kernels() {
  register_elementwise();
  register_reduce();
  register_data();
  register_matmul();
  register_conv1d();
  register_nn();
  register_creation();
  register_optim();
}

}  // namespace encore::cpu
