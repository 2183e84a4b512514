// Operands seen over one iteration shape, written once for the CPU loops (ops/cpu/loops.h) and
// the CUDA kernels' geometry (ops/cuda/indexing.h): broadcast dims get stride 0, size-1 dims
// are dropped, and adjacent dims that are contiguous for every operand are merged, so most
// loops end up with one or two dims.
#pragma once

#include <array>

#include "ops/op.h"

namespace encore {

/// Strides of `t` seen over `shape` (right-aligned, 0 where `t` is broadcast).
inline Strides broadcast_strides(const TensorRef& t, const Shape& shape) {
  Strides s = Dims::filled(shape.size(), 0);
  const int off = shape.size() - t.shape.size();
  for (int i = 0; i < t.shape.size(); ++i)
    s[off + i] = (t.shape[i] == 1 && shape[off + i] != 1) ? 0 : t.strides[i];
  return s;
}

/// An iteration shape with the strides of N operands over it, dims merged.
template <int N> struct MergedDims {
  int ndim = 0;
  bool empty = false;  // some dim has size 0
  int64_t shape[kMaxDims] = {};
  int64_t strides[N][kMaxDims] = {};
};

template <int N>
MergedDims<N> merge_dims(const Shape& shape, const std::array<Strides, N>& strides) {
  MergedDims<N> m;
  for (int d = 0; d < shape.size(); ++d) {
    m.empty |= shape[d] == 0;
    if (shape[d] == 1) continue;
    if (m.ndim > 0) {
      bool merge = true;
      for (int k = 0; k < N && merge; ++k)
        merge = m.strides[k][m.ndim - 1] == strides[k][d] * shape[d];
      if (merge) {
        m.shape[m.ndim - 1] *= shape[d];
        for (int k = 0; k < N; ++k) m.strides[k][m.ndim - 1] = strides[k][d];
        continue;
      }
    }
    m.shape[m.ndim] = shape[d];
    for (int k = 0; k < N; ++k) m.strides[k][m.ndim] = strides[k][d];
    ++m.ndim;
  }
  return m;
}

/// The part of `t` covering `shape` from `start` along `axis`, every `step`-th entry there.
inline TensorRef sub_view(const TensorRef& t, int axis, int64_t start, const Shape& shape,
                          int64_t step = 1) {
  TensorRef v = t;
  v.data = static_cast<char*>(t.data) +
           start * t.strides[axis] * static_cast<int64_t>(itemsize(t.dtype));
  v.shape = shape;
  // With one entry the stride does not matter (and multiplying by a huge step would overflow).
  if (shape[axis] > 1) v.strides[axis] *= step;
  return v;
}

}  // namespace encore
