// A number passed to an op: a fill value, a scalar operand, a bound. It is a double, or an
// int64 held exactly (int64 values above 2^53 do not survive a trip through double), so
// full((1,), 2**62 + 1, int64) and t + (2**62 + 1) are exact on int64 tensors.
#pragma once

#include "core/cxx20.h"

#include <bit>
#include <cstdint>
#include <string>
#include <type_traits>

#include "core/dtype.h"

namespace encore {

struct Scalar {
  double d = 0.0;         // the value as a double (rounded for large integers)
  int64_t i = 0;          // the value as an integer: exact, or a double truncated toward zero
                          // (0 for a double that no int64 holds; check() rejects those)
  bool integral = false;  // constructed from an integer

  constexpr Scalar() = default;
  template <class T>
  requires std::is_integral_v<T>
  constexpr Scalar(T v) {  // NOLINT(google-explicit-constructor): numbers convert implicitly
    if constexpr (std::is_unsigned_v<T> && sizeof(T) >= sizeof(int64_t)) {
      if (v > static_cast<uint64_t>(INT64_MAX)) {
        *this = Scalar(static_cast<double>(v));
        return;
      }
    }
    d = static_cast<double>(v);
    i = static_cast<int64_t>(v);
    integral = true;
  }
  template <class T>
  requires std::is_floating_point_v<T>
  constexpr Scalar(T v) : d(static_cast<double>(v)) {  // NOLINT(google-explicit-constructor)
    // -2^63 <= d < 2^63: the int64 range, NaN excluded.
    if (d >= -9223372036854775808.0 && d < 9223372036854775808.0) i = static_cast<int64_t>(d);
  }

  /// Throws a ValueError naming `op` unless a tensor of `dtype` can hold this value. Floating
  /// dtypes take any value. Integer dtypes take a finite value within their range after
  /// truncation toward zero: 2.5 fills an int tensor with 2 (as NumPy and PyTorch do), NaN
  /// and +-inf are errors (they used to become INT64_MIN).
  void check(DType dtype, const char* op) const;
  /// check() for an operand of arithmetic or of a comparison, which an integer dtype also needs
  /// whole: NumPy and PyTorch compute `i * 2.5` and `i < 1.5` in floating point, which an op on
  /// an int tensor cannot; truncated, they silently gave `i * 2` and `i < 1`.
  void check_operand(DType dtype, const char* op) const;
  /// -x, exact for integers (but -INT64_MIN, which only a double holds).
  Scalar operator-() const;
  /// "3", "-2.5", "nan".
  std::string str() const;
  /// Same kind and same bits (0.0 and -0.0 differ; a NaN equals itself).
  friend bool operator==(const Scalar& a, const Scalar& b) {
    return a.integral == b.integral && a.i == b.i &&
           std::bit_cast<uint64_t>(a.d) == std::bit_cast<uint64_t>(b.d);
  }
};

}  // namespace encore
