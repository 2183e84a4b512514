// Strided iteration for CPU kernels: operands are viewed over the output shape (broadcast
// dims get stride 0), adjacent dims that are contiguous for every operand are merged, and
// the innermost dim runs as a tight loop.
#pragma once

#include <array>

#include "ops/registry.h"

namespace encore::cpu {

/// Strides of `t` seen over `shape` (right-aligned, 0 where `t` is broadcast).
inline Strides broadcast_strides(const TensorRef& t, const Shape& shape) {
  Strides s = Dims::filled(shape.size(), 0);
  const int off = shape.size() - t.shape.size();
  for (int i = 0; i < t.shape.size(); ++i)
    s[off + i] = (t.shape[i] == 1 && shape[off + i] != 1) ? 0 : t.strides[i];
  return s;
}

template <int N> class StridedLoop {
 public:
  StridedLoop(const Shape& shape, const std::array<Strides, N>& strides) {
    // Drop size-1 dims, then merge dims that are contiguous for all operands.
    for (int d = 0; d < shape.size(); ++d) {
      empty_ |= shape[d] == 0;
      if (shape[d] == 1) continue;
      if (ndim_ > 0) {
        bool merge = true;
        for (int k = 0; k < N && merge; ++k) merge = st_[k][ndim_ - 1] == strides[k][d] * shape[d];
        if (merge) {
          shape_[ndim_ - 1] *= shape[d];
          for (int k = 0; k < N; ++k) st_[k][ndim_ - 1] = strides[k][d];
          continue;
        }
      }
      shape_[ndim_] = shape[d];
      for (int k = 0; k < N; ++k) st_[k][ndim_] = strides[k][d];
      ++ndim_;
    }
  }

  /// Calls f(offsets, inner_strides, n) for each innermost run; offsets are in elements.
  template <class F> void run(F&& f) const {
    if (empty_) return;
    std::array<int64_t, N> off{};
    if (ndim_ == 0) {
      f(off, std::array<int64_t, N>{}, int64_t{1});
      return;
    }
    std::array<int64_t, N> inner;
    for (int k = 0; k < N; ++k) inner[k] = st_[k][ndim_ - 1];
    const int64_t n = shape_[ndim_ - 1];
    int64_t idx[kMaxDims] = {};
    for (;;) {
      f(off, inner, n);
      int d = ndim_ - 2;
      for (; d >= 0; --d) {
        for (int k = 0; k < N; ++k) off[k] += st_[k][d];
        if (++idx[d] < shape_[d]) break;
        for (int k = 0; k < N; ++k) off[k] -= st_[k][d] * shape_[d];
        idx[d] = 0;
      }
      if (d < 0) return;
    }
  }

 private:
  bool empty_ = false;
  int ndim_ = 0;
  int64_t shape_[kMaxDims] = {};
  int64_t st_[N][kMaxDims] = {};
};

}  // namespace encore::cpu
