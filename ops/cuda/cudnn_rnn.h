// Internal to the cuDNN RNN ops (LSTM, GRU): moving weights between our kernel, recurrent kernel
// and bias tensors and cuDNN's weight space, one launch for all matrices and biases.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace encore::cuda {

/// One matrix (or bias: cols = 1) of the weight space and where it lives in our tensor:
/// element (r, c) is ws[offset + r * ws_row + c * ws_col] and tensor[r * t_row + c * t_col].
struct RnnSlot {
  int64_t offset, rows, cols, ws_row, ws_col;
  float* tensor;
  int64_t t_row, t_col;
};

// LSTM: 4 input matrices, 4 recurrent matrices, 4 input biases; GRU: 3 + 3 matrices, 3 + 3 biases.
constexpr int kRnnSlots = 12;

struct RnnSlots {
  RnnSlot slot[kRnnSlots];
  int count = 0;
};

/// pack: weight space <- tensors; otherwise tensors <- weight space.
void move_rnn_weights(const RnnSlots& slots, float* weight_space, bool pack, cudaStream_t stream);
void fill_int32(int32_t* p, int64_t n, int32_t value, cudaStream_t stream);

}  // namespace encore::cuda
