// The one list of ops. Everything else (kernels per backend, backward formulas, gradcheck
// cases, graph printing) is found from here through the registry.
#pragma once

#include <cstdint>

// clang-format off
#define ENCORE_OPS(X)                                                                       \
  /* elementwise, one input */                                                              \
  X(neg) X(exp) X(log) X(sqrt) X(tanh) X(sigmoid) X(relu) X(abs) X(softplus)                \
  X(leaky_relu) X(pow_scalar) X(add_scalar) X(mul_scalar) X(clip)                           \
  /* elementwise, two inputs with broadcasting */                                           \
  X(add) X(sub) X(mul) X(div) X(maximum) X(minimum)                                         \
  /* comparisons: 1/0 masks in the input dtype */                                           \
  X(eq) X(ne) X(gt) X(ge) X(lt) X(le)                                                       \
  /* reductions */                                                                          \
  X(sum) X(max)                                                                             \
  /* views: no kernel, share storage */                                                     \
  X(reshape) X(permute) X(slice) X(expand)                                                  \
  /* data movement */                                                                       \
  X(copy) X(cast) X(to_device) X(concat) X(slice_grad) X(flip)                              \
  /* linear algebra and convolution */                                                      \
  X(matmul) X(conv1d) X(conv1d_backward_data) X(conv1d_backward_filter)                    \
  /* neural-network building blocks */                                                      \
  X(softmax) X(log_softmax) X(dropout) X(gather_last) X(scatter_last)                       \
  X(lstm_cell) X(lstm_cell_backward)                                                        \
  /* CUDA only: the cuDNN RNN fast path over a whole sequence (defined by the CUDA backend) */ \
  X(cudnn_lstm) X(cudnn_lstm_backward)                                                      \
  /* creation */                                                                            \
  X(full) X(arange) X(uniform) X(normal)                                                    \
  /* in place: write their first input(s), return nothing */                                \
  X(copy_) X(add_) X(fill_) X(add_scalar_) X(sgd_update) X(adam_update) X(rmsprop_update)
// clang-format on

namespace encore {

enum class OpId : uint16_t {
#define ENCORE_OP_ENUM(name) name,
  ENCORE_OPS(ENCORE_OP_ENUM)
#undef ENCORE_OP_ENUM
      count
};

constexpr int kNumOps = static_cast<int>(OpId::count);

}  // namespace encore
