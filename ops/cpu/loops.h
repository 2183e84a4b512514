// Strided iteration for CPU kernels: operands seen over the output shape with their dims
// merged (ops/strided.h), the innermost dim run as a tight loop.
#pragma once

#include <array>

#include "ops/registry.h"
#include "ops/strided.h"

namespace encore::cpu {

using encore::broadcast_strides;

template <int N> class StridedLoop {
 public:
  StridedLoop(const Shape& shape, const std::array<Strides, N>& strides)
      : m_(merge_dims<N>(shape, strides)) {}

  /// Calls f(offsets, inner_strides, n) for each innermost run; offsets are in elements.
  template <class F> void run(F&& f) const {
    if (m_.empty) return;
    std::array<int64_t, N> off{};
    const int ndim = m_.ndim;
    if (ndim == 0) {
      f(off, std::array<int64_t, N>{}, int64_t{1});
      return;
    }
    std::array<int64_t, N> inner;
    for (int k = 0; k < N; ++k) inner[k] = m_.strides[k][ndim - 1];
    const int64_t n = m_.shape[ndim - 1];
    int64_t idx[kMaxDims] = {};
    for (;;) {
      f(off, inner, n);
      int d = ndim - 2;
      for (; d >= 0; --d) {
        for (int k = 0; k < N; ++k) off[k] += m_.strides[k][d];
        if (++idx[d] < m_.shape[d]) break;
        for (int k = 0; k < N; ++k) off[k] -= m_.strides[k][d] * m_.shape[d];
        idx[d] = 0;
      }
      if (d < 0) return;
    }
  }

 private:
  MergedDims<N> m_;
};

}  // namespace encore::cpu
