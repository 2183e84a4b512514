// The fused LSTM cell, shared by the CPU and CUDA kernels of lstm_cell (one step) and
// lstm_sequence (a whole sequence), and the sequence indexing gru_sequence shares. Pre-activations
// z have Keras' gate order in each row: input, forget, cell candidate, output.
#pragma once

#include <cstdint>

#include "ops/activation.h"

namespace encore {

/// Unit `u` of one row: zr points at the row's 4 * units pre-activations.
template <class T>
ENCORE_HD void lstm_gates(const T* zr, T c_prev, int64_t u, int64_t units, Activation act,
                          Activation rec, T& h, T& c) {
  const T i = fn::activate(rec, zr[u]);
  const T f = fn::activate(rec, zr[units + u]);
  const T g = fn::activate(act, zr[2 * units + u]);
  const T o = fn::activate(rec, zr[3 * units + u]);
  c = f * c_prev + i * g;
  h = o * fn::activate(act, c);
}

/// The gradients of unit `u` of one row: its four gate pre-activations (into gr, the row of
/// the gradient) and the previous cell state, from those of its output (gh) and cell state (gc).
template <class T>
ENCORE_HD void lstm_gates_backward(const T* zr, T c_prev, T c, T gh, T gc, T* gr, T& gc_prev,
                                   int64_t u, int64_t units, Activation act, Activation rec) {
  const T zi = zr[u], zf = zr[units + u], zg = zr[2 * units + u], zo = zr[3 * units + u];
  const T i = fn::activate(rec, zi), f = fn::activate(rec, zf), g = fn::activate(act, zg),
          o = fn::activate(rec, zo);
  const T tc = fn::activate(act, c);
  const T dc = gc + gh * o * fn::activate_grad(act, c, tc);
  gr[u] = dc * g * fn::activate_grad(rec, zi, i);
  gr[units + u] = dc * c_prev * fn::activate_grad(rec, zf, f);
  gr[2 * units + u] = dc * i * fn::activate_grad(act, zg, g);
  gr[3 * units + u] = gh * tc * fn::activate_grad(rec, zo, o);
  gc_prev = dc * f;
}

/// lstm_cell: the new cell state and output of unit `u` of batch row `b`; z is (batch, 4 * units).
template <class T>
ENCORE_HD void lstm_cell_unit(const T* z, const T* c_prev, T* h, T* cn, int64_t b, int64_t u,
                              int64_t units, Activation act, Activation rec) {
  const int64_t k = b * units + u;
  lstm_gates(z + b * 4 * units, c_prev[k], u, units, act, rec, h[k], cn[k]);
}

/// lstm_cell_backward: the gradients of unit `u` of batch row `b`.
template <class T>
ENCORE_HD void lstm_cell_backward_unit(const T* z, const T* c_prev, const T* cn, const T* gh,
                                       const T* gc, T* gz, T* gc_prev, int64_t b, int64_t u,
                                       int64_t units, Activation act, Activation rec) {
  const int64_t k = b * units + u;
  lstm_gates_backward(z + b * 4 * units, c_prev[k], cn[k], gh[k], gc[k], gz + b * 4 * units,
                      gc_prev[k], u, units, act, rec);
}

/// The input step a sequence op processes `s`-th (-1 outside 0 .. steps - 1): last to first
/// when `reverse`.
ENCORE_HD int64_t seq_step(int64_t s, int64_t steps, bool reverse) {
  return s < 0 || s >= steps ? -1 : reverse ? steps - 1 - s : s;
}

/// One position of a sequence (B, steps, ...): the offset of row (b, t) in units of `width`.
ENCORE_HD int64_t seq_row(int64_t b, int64_t t, int64_t steps, int64_t width) {
  return (b * steps + t) * width;
}

/// lstm_sequence, step t for unit u of batch row b. z (B, steps, 4 units) holds x_t W + bias
/// + h_prev R; y and c (B, steps, units) receive h_t and c_t; tp is the step processed before
/// t (-1 at the first: a zero state).
template <class T>
ENCORE_HD void lstm_sequence_unit(const T* z, T* y, T* c, int64_t b, int64_t u, int64_t t,
                                  int64_t tp, int64_t steps, int64_t units, Activation act,
                                  Activation rec) {
  const int64_t k = seq_row(b, t, steps, units) + u;
  const T c_prev = tp >= 0 ? c[seq_row(b, tp, steps, units) + u] : T(0);
  lstm_gates(z + seq_row(b, t, steps, 4 * units), c_prev, u, units, act, rec, y[k], c[k]);
}

/// lstm_sequence_backward, step t for unit u of batch row b: the gradient of h_t is gy's plus,
/// unless t is the last step processed, dh_rec (B, units): what step t's successor sent back
/// through the recurrent kernel. dc (B, units) carries the cell state's gradient from step to
/// step (zero before the last step); gz (B, steps, 4 units) receives the gates'.
template <class T>
ENCORE_HD void lstm_sequence_backward_unit(const T* z, const T* c, const T* gy, const T* dh_rec,
                                           T* dc, T* gz, int64_t b, int64_t u, int64_t t,
                                           int64_t tp, int64_t steps, int64_t units, Activation act,
                                           Activation rec) {
  const int64_t k = seq_row(b, t, steps, units) + u, j = b * units + u;
  const T gh = dh_rec ? gy[k] + dh_rec[j] : gy[k];
  const T c_prev = tp >= 0 ? c[seq_row(b, tp, steps, units) + u] : T(0);
  T gc_prev;
  lstm_gates_backward(z + seq_row(b, t, steps, 4 * units), c_prev, c[k], gh, dc[j],
                      gz + seq_row(b, t, steps, 4 * units), gc_prev, u, units, act, rec);
  dc[j] = gc_prev;
}

}  // namespace encore
