// How the last two dims of a strided tensor map onto a BLAS matrix argument. cuBLAS and
// CBLAS take a matrix as (pointer, leading dimension, transposed?); views that fit need no
// copy (a transposed weight, a slice of a sequence), others are made contiguous first.
#pragma once

#include <algorithm>

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

}  // namespace encore
