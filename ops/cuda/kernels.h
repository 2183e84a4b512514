// Registration of the CUDA kernels, one function per op family (mirrors ops/cpu/kernels.h).
#pragma once

#include "ops/registry.h"

namespace encore::cuda {

inline void set_kernel(OpId op, KernelFn kernel, PrepareFn prepare = nullptr) {
  OpDef& def = mutable_op_def(op);
  def.kernel[static_cast<int>(DeviceType::CUDA)] = kernel;
  def.prepare[static_cast<int>(DeviceType::CUDA)] = prepare;
}

void register_unary();
void register_binary();
void register_reduce();
void register_data();
void register_transfer();
void register_matmul();
void register_conv1d();
void register_nn();
void register_creation();
void register_optim();
/// Defines the CUDA-only ops cudnn_lstm and cudnn_lstm_backward (all OpDef fields).
void define_cudnn_lstm();

/// Called once by the registry when the CUDA backend is built (no GPU needed).
void register_kernels();

}  // namespace encore::cuda
