// How the last two dims of a strided tensor map onto a BLAS matrix argument. cuBLAS and
// CBLAS take a matrix as (pointer, leading dimension, transposed?); views that fit need no
// copy (a transposed weight, a slice of a sequence), others are made contiguous first.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/shape.h"

namespace encore {

struct MatrixLayout {
  bool ok = false;
  bool transposed = false;  // stored column-major: pass with a transpose flag
  int64_t ld = 1;           // leading dimension
};

inline MatrixLayout matrix_layout(const Shape& shape, const Strides& strides) {
  const int n = shape.size();
  const int64_t rows = shape[n - 2], cols = shape[n - 1];
  const int64_t rs = strides[n - 2], cs = strides[n - 1];
  if ((cols == 1 || cs == 1) && (rows == 1 || rs >= std::max<int64_t>(1, cols)))
    return {true, false, rows == 1 ? std::max<int64_t>(1, cols) : rs};
  if ((rows == 1 || rs == 1) && (cols == 1 || cs >= std::max<int64_t>(1, rows)))
    return {true, true, cols == 1 ? std::max<int64_t>(1, rows) : cs};
  return {};
}

/// The batch of a matmul: the output's batch dims (all but the last two), and for each of them
/// each operand's element stride (0 where the operand broadcasts along it).
struct MatmulBatch {
  int dims = 0;
  int64_t count = 1;
  int64_t size[kMaxDims] = {}, stride_a[kMaxDims] = {}, stride_b[kMaxDims] = {};

  MatmulBatch(const Shape& a, const Strides& as, const Shape& b, const Strides& bs, const Shape& y)
      : dims(y.size() - 2) {
    for (int i = 0; i < dims; ++i) {
      size[i] = y[i];
      count *= y[i];
      const int ia = i - (dims - (a.size() - 2)), ib = i - (dims - (b.size() - 2));
      if (ia >= 0 && a[ia] != 1) stride_a[i] = as[ia];
      if (ib >= 0 && b[ib] != 1) stride_b[i] = bs[ib];
    }
  }

  /// Calls f(p, offset_a, offset_b) for every batch entry p, in order.
  template <class F> void for_each(F f) const {
    int64_t idx[kMaxDims] = {};
    int64_t off_a = 0, off_b = 0;
    for (int64_t p = 0; p < count; ++p) {
      f(p, off_a, off_b);
      for (int d = dims - 1; d >= 0; --d) {
        off_a += stride_a[d];
        off_b += stride_b[d];
        if (++idx[d] < size[d]) break;
        off_a -= stride_a[d] * size[d];
        off_b -= stride_b[d] * size[d];
        idx[d] = 0;
      }
    }
  }
};

}  // namespace encore
