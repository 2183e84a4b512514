// The fused LSTM cell for one (batch row, unit), shared by the CPU and CUDA kernels. z is
// (batch, 4 * units) with Keras' gate order in each row: input, forget, cell candidate, output.
#pragma once

#include <cstdint>

#include "ops/functors.h"

namespace encore {

/// The new cell state and output of unit `u` of batch row `b`.
template <class T>
ENCORE_HD void lstm_cell_unit(const T* z, const T* c_prev, T* h, T* cn, int64_t b, int64_t u,
                              int64_t units, Activation act, Activation rec) {
  const T* zr = z + b * 4 * units;
  const int64_t k = b * units + u;
  const T i = fn::activate(rec, zr[u]);
  const T f = fn::activate(rec, zr[units + u]);
  const T g = fn::activate(act, zr[2 * units + u]);
  const T o = fn::activate(rec, zr[3 * units + u]);
  const T c = f * c_prev[k] + i * g;
  cn[k] = c;
  h[k] = o * fn::activate(act, c);
}

/// The gradients of unit `u` of batch row `b`: its four gate pre-activations (gz) and the
/// previous cell state (gc_prev), from those of its output (gh) and cell state (gc).
template <class T>
ENCORE_HD void lstm_cell_backward_unit(const T* z, const T* c_prev, const T* cn, const T* gh,
                                       const T* gc, T* gz, T* gc_prev, int64_t b, int64_t u,
                                       int64_t units, Activation act, Activation rec) {
  const T* zr = z + b * 4 * units;
  T* gr = gz + b * 4 * units;
  const int64_t k = b * units + u;
  const T zi = zr[u], zf = zr[units + u], zg = zr[2 * units + u], zo = zr[3 * units + u];
  const T i = fn::activate(rec, zi), f = fn::activate(rec, zf), g = fn::activate(act, zg),
          o = fn::activate(rec, zo);
  const T tc = fn::activate(act, cn[k]);
  const T dc = gc[k] + gh[k] * o * fn::activate_grad(act, cn[k], tc);
  gr[u] = dc * g * fn::activate_grad(rec, zi, i);
  gr[units + u] = dc * c_prev[k] * fn::activate_grad(rec, zf, f);
  gr[2 * units + u] = dc * i * fn::activate_grad(act, zg, g);
  gr[3 * units + u] = gh[k] * tc * fn::activate_grad(rec, zo, o);
  gc_prev[k] = dc * f;
}

}  // namespace encore
