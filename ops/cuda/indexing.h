// Strided iteration for CUDA kernels: operands seen over one iteration shape with their dims
// merged (ops/strided.h), decomposed per element on the device.
#pragma once

#include <array>

#include "core/shape.h"
#include "ops/functors.h"
#include "ops/registry.h"
#include "ops/strided.h"

namespace encore::cuda {

template <int N> struct Geometry : MergedDims<N> {
  using MergedDims<N>::ndim;
  using MergedDims<N>::shape;
  using MergedDims<N>::strides;

  /// Element offsets of the operands at row-major position `linear` of the iteration shape.
  template <class Index> ENCORE_HD void offsets(Index linear, int64_t (&off)[N]) const {
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

using encore::broadcast_strides;

template <int N>
Geometry<N> make_geometry(const Shape& shape, const std::array<Strides, N>& strides) {
  Geometry<N> g;
  static_cast<MergedDims<N>&>(g) = merge_dims<N>(shape, strides);
  return g;
}

}  // namespace encore::cuda
