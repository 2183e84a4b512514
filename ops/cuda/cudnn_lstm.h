// Internal to the cuDNN LSTM ops: moving weights between our (C, 4U), (U, 4U), (4U) tensors and
// cuDNN's weight space, one launch for all matrices and biases.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace encore::cuda {

/// One matrix (or bias: cols = 1) of the weight space and where it lives in our tensor:
/// element (r, c) is ws[offset + r * ws_row + c * ws_col] and tensor[r * t_row + c * t_col].
struct LstmSlot {
  int64_t offset, rows, cols, ws_row, ws_col;
  float* tensor;
  int64_t t_row, t_col;
};

constexpr int kLstmSlots = 12;  // 4 input matrices, 4 recurrent matrices, 4 input biases

struct LstmSlots {
  LstmSlot slot[kLstmSlots];
  int count = 0;
};

/// pack: weight space <- tensors; otherwise tensors <- weight space.
void move_lstm_weights(const LstmSlots& slots, float* weight_space, bool pack, cudaStream_t stream);
void fill_int32(int32_t* p, int64_t n, int32_t value, cudaStream_t stream);

}  // namespace encore::cuda
