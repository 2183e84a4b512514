// conv1d's float64 CPU kernels (gradcheck, references; oneDNN has no float64 convolution): plain
// loops over the index formula of ops/conv.h, which the CUDA direct kernels share.
#pragma once

#include "ops/conv.h"

namespace encore::cpu {

template <class T> void conv1d_reference(const ConvGeometry& g, const T* x, const T* w, T* y) {
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t t = 0; t < g.out_length; ++t) {
      T* yr = y + (n * g.out_length + t) * g.filters;
      for (int64_t f = 0; f < g.filters; ++f) yr[f] = T(0);
      for (int64_t k = 0; k < g.kernel; ++k) {
        const int64_t i = g.input_step(t, k);
        if (i < 0 || i >= g.length) continue;
        for (int64_t ch = 0; ch < g.channels; ++ch) {
          const T xv = x[(n * g.length + i) * g.channels + ch];
          const T* wr = w + (k * g.channels + ch) * g.filters;
          for (int64_t f = 0; f < g.filters; ++f) yr[f] += xv * wr[f];
        }
      }
    }
}

template <class T>
void conv1d_backward_data_reference(const ConvGeometry& g, const T* gy, const T* w, T* gx) {
  for (int64_t i = 0; i < g.n * g.length * g.channels; ++i) gx[i] = T(0);
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t t = 0; t < g.out_length; ++t) {
      const T* gr = gy + (n * g.out_length + t) * g.filters;
      for (int64_t k = 0; k < g.kernel; ++k) {
        const int64_t i = g.input_step(t, k);
        if (i < 0 || i >= g.length) continue;
        for (int64_t ch = 0; ch < g.channels; ++ch) {
          const T* wr = w + (k * g.channels + ch) * g.filters;
          T acc = T(0);
          for (int64_t f = 0; f < g.filters; ++f) acc += gr[f] * wr[f];
          gx[(n * g.length + i) * g.channels + ch] += acc;
        }
      }
    }
}

template <class T>
void conv1d_backward_filter_reference(const ConvGeometry& g, const T* x, const T* gy, T* gw) {
  for (int64_t i = 0; i < g.kernel * g.channels * g.filters; ++i) gw[i] = T(0);
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t t = 0; t < g.out_length; ++t) {
      const T* gr = gy + (n * g.out_length + t) * g.filters;
      for (int64_t k = 0; k < g.kernel; ++k) {
        const int64_t i = g.input_step(t, k);
        if (i < 0 || i >= g.length) continue;
        for (int64_t ch = 0; ch < g.channels; ++ch) {
          const T xv = x[(n * g.length + i) * g.channels + ch];
          T* wr = gw + (k * g.channels + ch) * g.filters;
          for (int64_t f = 0; f < g.filters; ++f) wr[f] += xv * gr[f];
        }
      }
    }
}

}  // namespace encore::cpu
