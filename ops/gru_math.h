// The fused GRU cell (Keras' reset_after=True form, which is also cuDNN's), shared by the CPU
// and CUDA kernels of gru_cell (one step) and gru_sequence (a whole sequence). xz = x_t W +
// b_input and hz = h_{t-1} R + b_recurrent have Keras' gate order in each row: update z,
// reset r, candidate h:
//   z = rec(xz_z + hz_z), r = rec(xz_r + hz_r), hh = act(xz_h + r * hz_h),
//   h = z * h_prev + (1 - z) * hh.
#pragma once

#include <cstdint>

#include "ops/activation.h"
#include "ops/lstm_math.h"

namespace encore {

/// The new state of unit `u` of one row: xr and hr point at the row's 3 * units projections.
template <class T>
ENCORE_HD T gru_gates(const T* xr, const T* hr, T h_prev, int64_t u, int64_t units, Activation act,
                      Activation rec) {
  const T z = fn::activate(rec, xr[u] + hr[u]);
  const T r = fn::activate(rec, xr[units + u] + hr[units + u]);
  const T hh = fn::activate(act, xr[2 * units + u] + r * hr[2 * units + u]);
  return z * h_prev + (T(1) - z) * hh;
}

/// The gradients of unit `u` of one row with respect to its projections (into the rows gxr and
/// ghr) and, directly, to h_prev (the path through hz is the caller's: ghr R^T), from that of
/// its output (g).
template <class T>
ENCORE_HD void gru_gates_backward(const T* xr, const T* hr, T h_prev, T g, T* gxr, T* ghr,
                                  T& gh_prev, int64_t u, int64_t units, Activation act,
                                  Activation rec) {
  const int64_t iz = u, ir = units + u, ih = 2 * units + u;
  const T az = xr[iz] + hr[iz], ar = xr[ir] + hr[ir];
  const T z = fn::activate(rec, az), r = fn::activate(rec, ar);
  const T ah = xr[ih] + r * hr[ih];
  const T hh = fn::activate(act, ah);
  const T dz = g * (h_prev - hh) * fn::activate_grad(rec, az, z);
  const T dh = g * (T(1) - z) * fn::activate_grad(act, ah, hh);
  const T dr = dh * hr[ih] * fn::activate_grad(rec, ar, r);
  gxr[iz] = ghr[iz] = dz;
  gxr[ir] = ghr[ir] = dr;
  gxr[ih] = dh;
  ghr[ih] = dh * r;
  gh_prev = g * z;
}

/// gru_cell: the new state of unit `u` of batch row `b`; xz and hz are (batch, 3 * units).
template <class T>
ENCORE_HD void gru_cell_unit(const T* xz, const T* hz, const T* h_prev, T* h, int64_t b, int64_t u,
                             int64_t units, Activation act, Activation rec) {
  const int64_t row = b * 3 * units, k = b * units + u;
  h[k] = gru_gates(xz + row, hz + row, h_prev[k], u, units, act, rec);
}

/// gru_cell_backward: the gradients of unit `u` of batch row `b`.
template <class T>
ENCORE_HD void gru_cell_backward_unit(const T* xz, const T* hz, const T* h_prev, const T* gh,
                                      T* gxz, T* ghz, T* gh_prev, int64_t b, int64_t u,
                                      int64_t units, Activation act, Activation rec) {
  const int64_t row = b * 3 * units, k = b * units + u;
  gru_gates_backward(xz + row, hz + row, h_prev[k], gh[k], gxz + row, ghz + row, gh_prev[k], u,
                     units, act, rec);
}

/// gru_sequence, step t for unit u of batch row b: xw (B, steps, 3 units) holds x_t W +
/// b_input, hz the step's h_prev R + b_recurrent; y (B, steps, units) receives h_t; tp is the
/// step processed before t (-1 at the first: a zero state).
template <class T>
ENCORE_HD void gru_sequence_unit(const T* xw, const T* hz, T* y, int64_t b, int64_t u, int64_t t,
                                 int64_t tp, int64_t steps, int64_t units, Activation act,
                                 Activation rec) {
  const T h_prev = tp >= 0 ? y[seq_row(b, tp, steps, units) + u] : T(0);
  const int64_t row = seq_row(b, t, steps, 3 * units);
  y[seq_row(b, t, steps, units) + u] = gru_gates(xw + row, hz + row, h_prev, u, units, act, rec);
}

/// gru_sequence_backward, step t for unit u of batch row b: the gradient of h_t is gy's plus,
/// unless t is the last step processed, what its successor sent back through the recurrent
/// kernel (dh_rec (B, units)) and directly (dd (B, units), which this step then overwrites with
/// its own direct gradient of h_prev). gxw and ghz (B, steps, 3 units) receive the
/// projections' gradients.
template <class T>
ENCORE_HD void gru_sequence_backward_unit(const T* xw, const T* hz, const T* y, const T* gy,
                                          const T* dh_rec, T* dd, T* gxw, T* ghz, int64_t b,
                                          int64_t u, int64_t t, int64_t tp, int64_t steps,
                                          int64_t units, Activation act, Activation rec) {
  const int64_t k = seq_row(b, t, steps, units) + u, j = b * units + u;
  const T g = dh_rec ? gy[k] + dh_rec[j] + dd[j] : gy[k];
  const T h_prev = tp >= 0 ? y[seq_row(b, tp, steps, units) + u] : T(0);
  const int64_t row = seq_row(b, t, steps, 3 * units);
  T gh_prev;
  gru_gates_backward(xw + row, hz + row, h_prev, g, gxw + row, ghz + row, gh_prev, u, units, act,
                     rec);
  dd[j] = gh_prev;
}

}  // namespace encore
