#include "ops/cuda/cudnn_rnn.h"
#include "ops/cuda/device/vector.cuh"
#include "ops/cuda/launch.h"

namespace encore::cuda {
namespace {

template <bool Pack>
__global__ void move_weights(RnnSlots slots, float* __restrict__ ws, int64_t total) {
  for (int64_t e = thread_index(); e < total; e += thread_count()) {
    int64_t i = e;
    int s = 0;  // e < total, so the slot is found before the table ends
    while (i >= slots.slot[s].rows * slots.slot[s].cols) {
      i -= slots.slot[s].rows * slots.slot[s].cols;
      ++s;
    }
    const RnnSlot& sl = slots.slot[s];
    const int64_t r = i / sl.cols, c = i % sl.cols;
    float& w = ws[sl.offset + r * sl.ws_row + c * sl.ws_col];
    float& t = sl.tensor[r * sl.t_row + c * sl.t_col];
    if (Pack)
      w = t;
    else
      t = w;
  }
}

__global__ void fill(int32_t* p, int64_t n, int32_t v) {
  for (int64_t i = thread_index(); i < n; i += thread_count()) p[i] = v;
}

}  // namespace

void move_rnn_weights(const RnnSlots& slots, float* weight_space, bool pack, cudaStream_t stream) {
  int64_t total = 0;
  for (int s = 0; s < slots.count; ++s) total += slots.slot[s].rows * slots.slot[s].cols;
  if (total == 0) return;
  if (pack)
    move_weights<true><<<grid_for(total), kBlock, 0, stream>>>(slots, weight_space, total);
  else
    move_weights<false><<<grid_for(total), kBlock, 0, stream>>>(slots, weight_space, total);
  ENCORE_CUDA_LAUNCH_CHECK(pack ? "cudnn_rnn pack" : "cudnn_rnn unpack");
}

void fill_int32(int32_t* p, int64_t n, int32_t value, cudaStream_t stream) {
  if (n == 0) return;
  fill<<<grid_for(n), kBlock, 0, stream>>>(p, n, value);
  ENCORE_CUDA_LAUNCH_CHECK("cudnn_rnn");
}

}  // namespace encore::cuda
