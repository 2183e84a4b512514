#include "ops/cuda/kernels.h"

namespace encore::cuda {

void register_kernels() {
  register_unary();
  register_binary();
  register_reduce();
  register_data();
  register_transfer();
  register_matmul();
  register_conv1d();
  register_nn();
  register_creation();
  register_optim();
  define_cudnn_lstm();
}

}  // namespace encore::cuda
