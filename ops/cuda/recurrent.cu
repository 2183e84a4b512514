// lstm_sequence, gru_sequence and their backward ops on CUDA: the loops of
// ops/defs/recurrent.cpp with cuBLAS GEMMs and one gate kernel per step (the math:
// ops/lstm_math.h, ops/gru_math.h). Row-major matrices are handed
// to column-major cuBLAS as their transposes: C = A op(B) is computed as C^T = op(B)^T A^T.
#include "ops/cuda/blas.h"
#include "ops/cuda/device/vector.cuh"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.h"
#include "ops/gru_math.h"
#include "ops/nn.h"

namespace encore::cuda {
namespace {

// Row-major C (m, n) = op(A) (m, k) @ op(B) (k, n) + beta * C, leading dimensions given.
template <class T>
void gemm_rows(cublasHandle_t h, const char* op, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
               const T* a, int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  const cublasOperation_t oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  gemm<T>(h, op, ob, oa, blas_int(n, op), blas_int(m, op), blas_int(k, op), b, blas_int(ldb, op), 0,
          a, blas_int(lda, op), 0, beta, c, blas_int(ldc, op), 0, 1);
}

// gR += sum over steps of h_prev^T gz, gz (B, T, width): per batch row one GEMM over all steps
// but the first processed (its h_prev is zero).
template <class T>
void recurrent_kernel_grad(cublasHandle_t h, const char* op, const T* y, const T* gz, T* gr,
                           int64_t batch, int64_t steps, int64_t units, int64_t width,
                           bool reverse) {
  const int64_t first = reverse ? 1 : 0;  // the first row of y that is some step's h_prev
  for (int64_t b = 0; b < batch && steps > 1; ++b)
    gemm_rows<T>(h, op, true, false, units, width, steps - 1, y + seq_row(b, first, steps, units),
                 units, gz + seq_row(b, 1 - first, steps, width), width, T(1), gr, width);
}

template <class T>
__global__ void lstm_step_kernel(const T* __restrict__ z, T* __restrict__ y, T* __restrict__ c,
                                 int64_t batch, int64_t units, int64_t t, int64_t tp, int64_t steps,
                                 Activation act, Activation rec) {
  for (int64_t k = thread_index(); k < batch * units; k += thread_count())
    lstm_sequence_unit(z, y, c, k / units, k % units, t, tp, steps, units, act, rec);
}

template <class T>
__global__ void lstm_step_backward_kernel(const T* __restrict__ z, const T* __restrict__ c,
                                          const T* __restrict__ gy, const T* __restrict__ dh_rec,
                                          T* __restrict__ dc, T* __restrict__ gz, int64_t batch,
                                          int64_t units, int64_t t, int64_t tp, int64_t steps,
                                          Activation act, Activation rec) {
  for (int64_t k = thread_index(); k < batch * units; k += thread_count())
    lstm_sequence_backward_unit(z, c, gy, dh_rec, dc, gz, k / units, k % units, t, tp, steps, units,
                                act, rec);
}

void lstm_sequence(const KernelCtx& c) {
  const OnDevice dev(c);
  const auto& a = c.attrs.as<RecurrenceAttrs>();
  const int64_t batch = c.in[0].shape[0], steps = c.in[0].shape[1], units = c.in[1].shape[0];
  const int64_t g = 4 * units;
  if (batch * steps * units == 0) return;
  visit_float(c.in[0].dtype, [&]<class T>() {
    const cublasHandle_t h = cublas(dev.device());
    const T* r = c.in[1].ptr<const T>();
    T* y = c.out[0].ptr<T>();
    T* cs = c.out[1].ptr<T>();
    T* z = c.out[2].ptr<T>();
    ENCORE_CUDA_CHECK("lstm_sequence",
                      cudaMemcpyAsync(z, c.in[0].data, batch * steps * g * sizeof(T),
                                      cudaMemcpyDeviceToDevice, dev.stream()));
    for (int64_t s = 0; s < steps; ++s) {
      const int64_t t = seq_step(s, steps, a.reverse), tp = seq_step(s - 1, steps, a.reverse);
      if (tp >= 0)
        gemm_rows<T>(h, "lstm_sequence", false, false, batch, g, units, y + tp * units,
                     steps * units, r, g, T(1), z + t * g, steps * g);
      lstm_step_kernel<T><<<grid_for(batch * units), kBlock, 0, dev.stream()>>>(
          z, y, cs, batch, units, t, tp, steps, a.activation, a.recurrent_activation);
      ENCORE_CUDA_LAUNCH_CHECK("lstm_sequence");
    }
  });
}

void lstm_sequence_backward(const KernelCtx& c) {
  const OnDevice dev(c);
  const auto& a = c.attrs.as<RecurrenceAttrs>();
  const int64_t batch = c.in[1].shape[0], steps = c.in[1].shape[1], units = c.in[1].shape[2];
  const int64_t g = 4 * units;
  visit_float(c.in[0].dtype, [&]<class T>() {
    const char* op = "lstm_sequence_backward";
    const T* r = c.in[0].ptr<const T>();
    const T* y = c.in[1].ptr<const T>();
    const T* cs = c.in[2].ptr<const T>();
    const T* z = c.in[3].ptr<const T>();
    const T* gy = c.in[4].ptr<const T>();
    T* gz = c.out[0].ptr<T>();
    T* gr = c.out[1].ptr<T>();
    T* dh = c.out[2].ptr<T>();
    T* dc = dh + batch * units;
    ENCORE_CUDA_CHECK(op, cudaMemsetAsync(gr, 0, units * g * sizeof(T), dev.stream()));
    if (batch * steps * units == 0) return;
    ENCORE_CUDA_CHECK(op, cudaMemsetAsync(dc, 0, batch * units * sizeof(T), dev.stream()));
    const cublasHandle_t h = cublas(dev.device());
    for (int64_t s = steps - 1; s >= 0; --s) {
      const int64_t t = seq_step(s, steps, a.reverse), tp = seq_step(s - 1, steps, a.reverse),
                    tn = seq_step(s + 1, steps, a.reverse);
      if (tn >= 0)
        gemm_rows<T>(h, op, false, true, batch, units, g, gz + tn * g, steps * g, r, g, T(0), dh,
                     units);
      lstm_step_backward_kernel<T><<<grid_for(batch * units), kBlock, 0, dev.stream()>>>(
          z, cs, gy, tn >= 0 ? dh : nullptr, dc, gz, batch, units, t, tp, steps, a.activation,
          a.recurrent_activation);
      ENCORE_CUDA_LAUNCH_CHECK(op);
    }
    recurrent_kernel_grad<T>(h, op, y, gz, gr, batch, steps, units, g, a.reverse);
  });
}

template <class T>
__global__ void gru_step_kernel(const T* __restrict__ xw, T* __restrict__ hz, T* __restrict__ y,
                                int64_t batch, int64_t units, int64_t t, int64_t tp, int64_t steps,
                                Activation act, Activation rec) {
  for (int64_t k = thread_index(); k < batch * units; k += thread_count())
    gru_sequence_unit(xw, hz, y, k / units, k % units, t, tp, steps, units, act, rec);
}

// hz_t = b_rec in every batch row of step t (the recurrent GEMM adds h_prev R).
template <class T>
__global__ void fill_rows_kernel(T* __restrict__ hz, const T* __restrict__ bias, int64_t batch,
                                 int64_t width, int64_t t, int64_t steps) {
  for (int64_t k = thread_index(); k < batch * width; k += thread_count())
    hz[seq_row(k / width, t, steps, width) + k % width] = bias[k % width];
}

template <class T>
__global__ void gru_step_backward_kernel(const T* __restrict__ xw, const T* __restrict__ hz,
                                         const T* __restrict__ y, const T* __restrict__ gy,
                                         const T* __restrict__ dh_rec, T* __restrict__ dd,
                                         T* __restrict__ gxw, T* __restrict__ ghz, int64_t batch,
                                         int64_t units, int64_t t, int64_t tp, int64_t steps,
                                         Activation act, Activation rec) {
  for (int64_t k = thread_index(); k < batch * units; k += thread_count())
    gru_sequence_backward_unit(xw, hz, y, gy, dh_rec, dd, gxw, ghz, k / units, k % units, t, tp,
                               steps, units, act, rec);
}

// gb = the column sums of ghz (rows, width): one thread per column, in row order (as the CPU).
template <class T>
__global__ void column_sums_kernel(const T* __restrict__ ghz, T* __restrict__ gb, int64_t rows,
                                   int64_t width) {
  for (int64_t j = thread_index(); j < width; j += thread_count()) {
    T sum = 0;
    for (int64_t r = 0; r < rows; ++r) sum += ghz[r * width + j];
    gb[j] = sum;
  }
}

void gru_sequence(const KernelCtx& c) {
  const OnDevice dev(c);
  const auto& a = c.attrs.as<RecurrenceAttrs>();
  const int64_t batch = c.in[0].shape[0], steps = c.in[0].shape[1], units = c.in[1].shape[0];
  const int64_t g = 3 * units;
  if (batch * steps * units == 0) return;
  visit_float(c.in[0].dtype, [&]<class T>() {
    const cublasHandle_t h = cublas(dev.device());
    const T* xw = c.in[0].ptr<const T>();
    const T* r = c.in[1].ptr<const T>();
    const T* bias = c.in[2].ptr<const T>();
    T* y = c.out[0].ptr<T>();
    T* hz = c.out[1].ptr<T>();
    for (int64_t s = 0; s < steps; ++s) {
      const int64_t t = seq_step(s, steps, a.reverse), tp = seq_step(s - 1, steps, a.reverse);
      fill_rows_kernel<T>
          <<<grid_for(batch * g), kBlock, 0, dev.stream()>>>(hz, bias, batch, g, t, steps);
      ENCORE_CUDA_LAUNCH_CHECK("gru_sequence");
      if (tp >= 0)
        gemm_rows<T>(h, "gru_sequence", false, false, batch, g, units, y + tp * units,
                     steps * units, r, g, T(1), hz + t * g, steps * g);
      gru_step_kernel<T><<<grid_for(batch * units), kBlock, 0, dev.stream()>>>(
          xw, hz, y, batch, units, t, tp, steps, a.activation, a.recurrent_activation);
      ENCORE_CUDA_LAUNCH_CHECK("gru_sequence");
    }
  });
}

void gru_sequence_backward(const KernelCtx& c) {
  const OnDevice dev(c);
  const auto& a = c.attrs.as<RecurrenceAttrs>();
  const int64_t batch = c.in[2].shape[0], steps = c.in[2].shape[1], units = c.in[2].shape[2];
  const int64_t g = 3 * units;
  visit_float(c.in[0].dtype, [&]<class T>() {
    const char* op = "gru_sequence_backward";
    const T* xw = c.in[0].ptr<const T>();
    const T* r = c.in[1].ptr<const T>();
    const T* y = c.in[2].ptr<const T>();
    const T* hz = c.in[3].ptr<const T>();
    const T* gy = c.in[4].ptr<const T>();
    T* gxw = c.out[0].ptr<T>();
    T* gr = c.out[1].ptr<T>();
    T* gb = c.out[2].ptr<T>();
    T* ghz = c.out[3].ptr<T>();
    T* dh = c.out[4].ptr<T>();
    T* dd = dh + batch * units;
    ENCORE_CUDA_CHECK(op, cudaMemsetAsync(gr, 0, units * g * sizeof(T), dev.stream()));
    ENCORE_CUDA_CHECK(op, cudaMemsetAsync(gb, 0, g * sizeof(T), dev.stream()));
    if (batch * steps * units == 0) return;
    const cublasHandle_t h = cublas(dev.device());
    for (int64_t s = steps - 1; s >= 0; --s) {
      const int64_t t = seq_step(s, steps, a.reverse), tp = seq_step(s - 1, steps, a.reverse),
                    tn = seq_step(s + 1, steps, a.reverse);
      if (tn >= 0)
        gemm_rows<T>(h, op, false, true, batch, units, g, ghz + tn * g, steps * g, r, g, T(0), dh,
                     units);
      gru_step_backward_kernel<T><<<grid_for(batch * units), kBlock, 0, dev.stream()>>>(
          xw, hz, y, gy, tn >= 0 ? dh : nullptr, dd, gxw, ghz, batch, units, t, tp, steps,
          a.activation, a.recurrent_activation);
      ENCORE_CUDA_LAUNCH_CHECK(op);
    }
    recurrent_kernel_grad<T>(h, op, y, ghz, gr, batch, steps, units, g, a.reverse);
    column_sums_kernel<T><<<grid_for(g), kBlock, 0, dev.stream()>>>(ghz, gb, batch * steps, g);
    ENCORE_CUDA_LAUNCH_CHECK(op);
  });
}

const bool kRegistered = register_cuda_kernels({
    {"lstm_sequence", lstm_sequence},
    {"lstm_sequence_backward", lstm_sequence_backward},
    {"gru_sequence", gru_sequence},
    {"gru_sequence_backward", gru_sequence_backward},
});

}  // namespace
}  // namespace encore::cuda
