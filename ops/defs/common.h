// Helpers shared by the op definitions (shape inference and backward formulas).
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

/// Checks that a tensor of `dtype` can hold the scalar attributes of an op (see Scalar::check).
inline void check_scalars(const char* op, const Attrs& attrs, DType dtype) {
  if (const auto* s = std::get_if<ScalarAttrs>(&attrs)) s->value.check(dtype, op);
  if (const auto* c = std::get_if<ClipAttrs>(&attrs)) {
    c->lo.check(dtype, op);
    c->hi.check(dtype, op);
  }
  if (const auto* f = std::get_if<FullAttrs>(&attrs)) {
    f->value.check(dtype, op);
    f->step.check(dtype, op);
  }
}

/// Defines op `id` with the given fields; name comes from the op list.
inline OpDef& define(OpId id) { return mutable_op_def(id); }

}  // namespace encore::defs
