// CUDA kernels for softmax / log_softmax, dropout, gather_last / scatter_last and the fused
// LSTM cell (forward and backward). Same formulas as ops/cpu/nn.cpp.
#include "ops/cuda/device/philox.cuh"
#include "ops/cuda/device/vector.cuh"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.h"
#include "ops/cuda/random.h"
#include "ops/data.h"
#include "ops/functors.h"
#include "ops/lstm_math.h"
#include "ops/nn.h"
#include "ops/philox.h"

namespace encore::cuda {
namespace {

// ---- softmax -----------------------------------------------------------------------------

template <class T> __device__ __forceinline__ T warp_max(T v) {
  for (int o = 16; o > 0; o /= 2) v = fn::m_max(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
template <class T> __device__ __forceinline__ T warp_sum(T v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Reduces across the block (every thread gets the result); `shared` holds one slot per warp.
template <class T, bool Max> __device__ T block_reduce(T v, T* shared) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = Max ? warp_max(v) : warp_sum(v);
  __syncthreads();  // `shared` may still be read from a previous reduction
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  T r = shared[0];
  for (int w = 1; w < warps; ++w) r = Max ? fn::m_max(r, shared[w]) : r + shared[w];
  return r;
}

// Softmax over the last axis, one warp per row (rows of up to a few thousand entries).
template <class T, bool Log>
__global__ void softmax_rows_warp(const T* __restrict__ x, T* __restrict__ y, int64_t rows,
                                  int64_t n) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
       r < rows; r += warps) {
    const T* a = x + r * n;
    T* b = y + r * n;
    T m = a[0];
    for (int64_t i = lane; i < n; i += 32) m = fn::m_max(m, a[i]);
    m = warp_max(m);
    fn::SoftmaxSum<T> sum;
    for (int64_t i = lane; i < n; i += 32) sum.add(a[i], m);
    sum.ties = warp_sum(sum.ties);
    sum.rest = warp_sum(sum.rest);
    const T log_total = Log ? sum.log_total() : T(0);
    for (int64_t i = lane; i < n; i += 32)
      b[i] = fn::softmax_value<T, Log>(a[i], m, sum, log_total);
  }
}

// Softmax over the last axis, one block per row (long rows).
template <class T, bool Log>
__global__ void softmax_rows_block(const T* __restrict__ x, T* __restrict__ y, int64_t rows,
                                   int64_t n) {
  __shared__ T shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* a = x + r * n;
    T* b = y + r * n;
    T m = a[0];
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) m = fn::m_max(m, a[i]);
    m = block_reduce<T, true>(m, shared);
    fn::SoftmaxSum<T> sum;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sum.add(a[i], m);
    sum.ties = block_reduce<T, false>(sum.ties, shared);
    sum.rest = block_reduce<T, false>(sum.rest, shared);
    const T log_total = Log ? sum.log_total() : T(0);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
      b[i] = fn::softmax_value<T, Log>(a[i], m, sum, log_total);
  }
}

// Softmax over an inner axis: one thread per (outer, inner) column; neighbouring threads read
// neighbouring columns, so loads coalesce.
template <class T, bool Log>
__global__ void softmax_columns(const T* __restrict__ x, T* __restrict__ y, int64_t outer,
                                int64_t n, int64_t inner) {
  for (int64_t e = thread_index(); e < outer * inner; e += thread_count()) {
    const int64_t o = e / inner, j = e % inner;
    const T* a = x + o * n * inner + j;
    T* b = y + o * n * inner + j;
    T m = a[0];
    for (int64_t i = 1; i < n; ++i) m = fn::m_max(m, a[i * inner]);
    fn::SoftmaxSum<T> sum;
    for (int64_t i = 0; i < n; ++i) sum.add(a[i * inner], m);
    const T log_total = Log ? sum.log_total() : T(0);
    for (int64_t i = 0; i < n; ++i)
      b[i * inner] = fn::softmax_value<T, Log>(a[i * inner], m, sum, log_total);
  }
}

template <bool Log> void softmax_kernel(const KernelCtx& c) {
  const OnDevice dev(c);
  const char* op = Log ? "log_softmax" : "softmax";
  const int axis = c.attrs.as<AxisAttrs>().axis;
  const Shape& s = c.in[0].shape;
  int64_t outer = 1, n = 1, inner = 1;
  for (int i = 0; i < s.size(); ++i) (i < axis ? outer : i == axis ? n : inner) *= s[i];
  if (outer * n * inner == 0) return;
  visit_float(c.in[0].dtype, [&]<class T>() {
    const T* x = c.in[0].ptr<const T>();
    T* y = c.out[0].ptr<T>();
    if (inner > 1) {
      softmax_columns<T, Log>
          <<<grid_for(outer * inner), kBlock, 0, dev.stream()>>>(x, y, outer, n, inner);
    } else if (n <= 2048) {
      softmax_rows_warp<T, Log>
          <<<grid_for(outer, kBlock / 32), kBlock, 0, dev.stream()>>>(x, y, outer, n);
    } else {
      softmax_rows_block<T, Log><<<grid_for(outer, 1), kBlock, 0, dev.stream()>>>(x, y, outer, n);
    }
    ENCORE_CUDA_LAUNCH_CHECK(op);
  });
}

// ---- dropout -----------------------------------------------------------------------------

template <class T>
__global__ void dropout_masks(const T* __restrict__ x, T* __restrict__ y, T* __restrict__ mask,
                              int64_t n, const int64_t* __restrict__ state, float keep_above,
                              T scale) {
  for_each_philox_value(n, state, [&](int64_t i, uint32_t bits) {
    const T m = uniform01(bits) >= keep_above ? scale : T(0);
    mask[i] = m;
    y[i] = x[i] * m;
  });
}

void dropout_kernel(const KernelCtx& c) {
  const OnDevice dev(c);
  const double p = c.attrs.as<DropoutAttrs>().p;
  const int64_t n = c.in[0].numel();
  int64_t* state = c.in[1].ptr<int64_t>();
  visit_float(c.in[0].dtype, [&]<class T>() {
    if (n > 0) {
      const T scale = T(1.0 / (1.0 - p));
      dropout_masks<T>
          <<<grid_for(static_cast<int64_t>(philox_blocks(n))), kBlock, 0, dev.stream()>>>(
              c.in[0].ptr<const T>(), c.out[0].ptr<T>(), c.out[1].ptr<T>(), n, state,
              static_cast<float>(p), scale);
      ENCORE_CUDA_LAUNCH_CHECK("dropout");
    }
  });
  advance_generator(state, philox_blocks(static_cast<uint64_t>(n)), dev.stream(), "dropout");
}

// ---- gather / scatter along the last axis ------------------------------------------------

// An out-of-range index is never followed: the entry is left 0 and the op reported through
// the device's error word (raised at the next synchronization).
template <class T, class I>
__global__ void gather_last_kernel(const T* __restrict__ x, const I* __restrict__ index,
                                   T* __restrict__ y, int64_t rows, int64_t n, int* error,
                                   int code) {
  for (int64_t r = thread_index(); r < rows; r += thread_count()) {
    const int64_t k = static_cast<int64_t>(index[r]);
    if (k < 0 || k >= n) {
      *reinterpret_cast<volatile int*>(error) = code;
      y[r] = T(0);
    } else {
      y[r] = x[r * n + k];
    }
  }
}

// Writes every entry of the (rows, n) output, so no separate zero fill is needed.
template <class T, class I>
__global__ void scatter_last_kernel(const T* __restrict__ g, const I* __restrict__ index,
                                    T* __restrict__ y, int64_t rows, int64_t n, int* error,
                                    int code) {
  for (int64_t e = thread_index(); e < rows * n; e += thread_count()) {
    const int64_t r = e / n, j = e % n;
    const int64_t k = static_cast<int64_t>(index[r]);
    if (j == 0 && (k < 0 || k >= n)) *reinterpret_cast<volatile int*>(error) = code;
    y[e] = j == k ? g[r] : T(0);
  }
}

template <bool Gather> void gather_scatter_kernel(const KernelCtx& c) {
  const OnDevice dev(c);
  static const int code = error_code(c.op);  // one op per instantiation
  int* error = error_flag(dev.device());
  const int64_t rows = Gather ? c.out[0].numel() : c.in[0].numel();
  const int64_t n = Gather ? c.in[0].shape.back() : c.out[0].shape.back();
  if (rows == 0 || n == 0) return;
  visit_dtype(c.in[0].dtype, [&]<class T>() {
    auto run = [&]<class I>() {
      const I* index = c.in[1].ptr<const I>();
      if constexpr (Gather)
        gather_last_kernel<T, I><<<grid_for(rows), kBlock, 0, dev.stream()>>>(
            c.in[0].ptr<const T>(), index, c.out[0].ptr<T>(), rows, n, error, code);
      else
        scatter_last_kernel<T, I><<<grid_for(rows * n), kBlock, 0, dev.stream()>>>(
            c.in[0].ptr<const T>(), index, c.out[0].ptr<T>(), rows, n, error, code);
      ENCORE_CUDA_LAUNCH_CHECK(c.op);
    };
    if (c.in[1].dtype == DType::Int32)
      run.template operator()<int32_t>();
    else
      run.template operator()<int64_t>();
  });
}

// ---- fused LSTM cell (the math: ops/lstm_math.h) -------------------------------------------

template <class T>
__global__ void lstm_cell_kernel(const T* __restrict__ z, const T* __restrict__ c_prev,
                                 T* __restrict__ h, T* __restrict__ cn, int64_t batch,
                                 int64_t units, Activation act, Activation rec) {
  for (int64_t k = thread_index(); k < batch * units; k += thread_count())
    lstm_cell_unit(z, c_prev, h, cn, k / units, k % units, units, act, rec);
}

template <class T>
__global__ void lstm_cell_backward_kernel(const T* __restrict__ z, const T* __restrict__ c_prev,
                                          const T* __restrict__ cn, const T* __restrict__ gh,
                                          const T* __restrict__ gc, T* __restrict__ gz,
                                          T* __restrict__ gc_prev, int64_t batch, int64_t units,
                                          Activation act, Activation rec) {
  for (int64_t k = thread_index(); k < batch * units; k += thread_count())
    lstm_cell_backward_unit(z, c_prev, cn, gh, gc, gz, gc_prev, k / units, k % units, units, act,
                            rec);
}

void lstm_cell(const KernelCtx& c) {
  const OnDevice dev(c);
  const auto& a = c.attrs.as<LstmAttrs>();
  const int64_t batch = c.in[1].shape[0], units = c.in[1].shape[1];
  if (batch * units == 0) return;
  visit_float(c.in[0].dtype, [&]<class T>() {
    lstm_cell_kernel<T><<<grid_for(batch * units), kBlock, 0, dev.stream()>>>(
        c.in[0].ptr<const T>(), c.in[1].ptr<const T>(), c.out[0].ptr<T>(), c.out[1].ptr<T>(), batch,
        units, a.activation, a.recurrent_activation);
  });
  ENCORE_CUDA_LAUNCH_CHECK("lstm_cell");
}

void lstm_cell_backward(const KernelCtx& c) {
  const OnDevice dev(c);
  const auto& a = c.attrs.as<LstmAttrs>();
  const int64_t batch = c.in[1].shape[0], units = c.in[1].shape[1];
  if (batch * units == 0) return;
  visit_float(c.in[0].dtype, [&]<class T>() {
    lstm_cell_backward_kernel<T><<<grid_for(batch * units), kBlock, 0, dev.stream()>>>(
        c.in[0].ptr<const T>(), c.in[1].ptr<const T>(), c.in[2].ptr<const T>(),
        c.in[3].ptr<const T>(), c.in[4].ptr<const T>(), c.out[0].ptr<T>(), c.out[1].ptr<T>(), batch,
        units, a.activation, a.recurrent_activation);
  });
  ENCORE_CUDA_LAUNCH_CHECK("lstm_cell_backward");
}

}  // namespace

const bool kRegistered = register_cuda_kernels({
    {"softmax", softmax_kernel<false>},
    {"log_softmax", softmax_kernel<true>},
    {"dropout", dropout_kernel},
    {"gather_last", gather_scatter_kernel<true>},
    {"scatter_last", gather_scatter_kernel<false>},
    {"lstm_cell", lstm_cell},
    {"lstm_cell_backward", lstm_cell_backward},
});

}  // namespace encore::cuda
