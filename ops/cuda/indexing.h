// Strided iteration for CUDA kernels: operands seen over one iteration shape (0 strides where
// broadcast), size-1 dims dropped, and dims merged where every operand is contiguous across
// them — so most broadcasts end up with one or two dims to decompose per element.
#pragma once

#include <array>

#include "core/shape.h"
#include "ops/functors.h"
#include "ops/registry.h"

namespace encore::cuda {

template <int N>
struct Geometry {
  int ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t strides[N][kMaxDims] = {};

  /// Element offsets of the operands at row-major position `linear` of the iteration shape.
  template <class Index>
  ENCORE_HD void offsets(Index linear, int64_t (&off)[N]) const {
    for (int k = 0; k < N; ++k) off[k] = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      const Index size = static_cast<Index>(shape[d]);
      const Index i = linear % size;
      linear /= size;
      for (int k = 0; k < N; ++k) off[k] += static_cast<int64_t>(i) * strides[k][d];
    }
  }
  /// Operand k walks memory with stride 1 (or there is a single element).
  bool dense(int k) const { return ndim == 0 || (ndim == 1 && strides[k][0] == 1); }
  /// Operand k is one element seen everywhere.
  bool scalar(int k) const { return ndim == 1 && strides[k][0] == 0; }
};

/// Strides of `t` seen over `shape` (right-aligned, 0 where `t` is broadcast).
inline Strides broadcast_strides(const TensorRef& t, const Shape& shape) {
  Strides s = Dims::filled(shape.size(), 0);
  const int off = shape.size() - t.shape.size();
  for (int i = 0; i < t.shape.size(); ++i)
    s[off + i] = (t.shape[i] == 1 && shape[off + i] != 1) ? 0 : t.strides[i];
  return s;
}

template <int N>
Geometry<N> make_geometry(const Shape& shape, const std::array<Strides, N>& strides) {
  Geometry<N> g;
  for (int d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (g.ndim > 0) {
      bool merge = true;
      for (int k = 0; k < N && merge; ++k)
        merge = g.strides[k][g.ndim - 1] == strides[k][d] * shape[d];
      if (merge) {
        g.shape[g.ndim - 1] *= shape[d];
        for (int k = 0; k < N; ++k) g.strides[k][g.ndim - 1] = strides[k][d];
        continue;
      }
    }
    g.shape[g.ndim] = shape[d];
    for (int k = 0; k < N; ++k) g.strides[k][g.ndim] = strides[k][d];
    ++g.ndim;
  }
  return g;
}

}  // namespace encore::cuda
