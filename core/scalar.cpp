#include "core/scalar.h"

#include <charconv>
#include <cmath>

#include "core/error.h"

namespace encore {

void Scalar::check(DType dtype, const char* op) const {
  if (is_floating(dtype)) return;
  bool fits;
  if (integral) {
    fits = dtype == DType::Int64 || (i >= INT32_MIN && i <= INT32_MAX);
  } else {
    // [-2^(bits-1), 2^(bits-1)): both ends are exact doubles; NaN fails both comparisons.
    const double lo = dtype == DType::Int32 ? -2147483648.0 : -9223372036854775808.0;
    const double t = std::trunc(d);
    fits = t >= lo && t < -lo;
  }
  ENCORE_CHECK(fits, ValueError, "[", op, "] the value ", str(), " cannot be stored in an ",
               name(dtype), " tensor", integral || std::isfinite(d) ? " (out of range)" : "");
}

void Scalar::check_operand(DType dtype, const char* op) const {
  check(dtype, op);
  ENCORE_CHECK(
      integral || is_floating(dtype) || std::trunc(d) == d, ValueError, "[", op, "] the value ",
      str(), " is not a whole number, so an ", name(dtype),
      " tensor cannot take it as an operand: convert the tensor to a floating dtype first");
}

Scalar Scalar::operator-() const {
  if (!integral) return Scalar(-d);
  if (i == INT64_MIN) return Scalar(-d);
  return Scalar(-i);
}

std::string Scalar::str() const {
  if (integral) return std::to_string(i);
  char buf[32];
  return {buf, std::to_chars(buf, buf + sizeof buf, d).ptr};
}

}  // namespace encore
