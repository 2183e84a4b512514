// Helpers shared by the op families (shape inference and backward formulas).
#pragma once

#include "ops/dispatch.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace encore::defs {

inline TensorMeta meta_like(const Tensor& t) { return {t.shape(), {}, 0, t.dtype(), t.device()}; }
inline TensorMeta meta(const Shape& s, DType d, Device dev) { return {s, {}, 0, d, dev}; }

inline void require_float(const char* op, const Tensor& t) {
  ENCORE_CHECK(is_floating(t.dtype()), DTypeError, "[", op, "] needs a floating tensor, got ",
               describe(t));
}
inline void require_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  ENCORE_CHECK(a.dtype() == b.dtype(), DTypeError, "[", op, "] dtypes differ: ", describe(a),
               " and ", describe(b), "; convert one with .to(dtype)");
}

}  // namespace encore::defs
