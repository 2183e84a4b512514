// Element types. float32 everywhere; float64 on the CPU for references and gradcheck;
// int32/int64 for labels, indices and counters.
#pragma once

#include "core/cxx20.h"

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace encore {

enum class DType : uint8_t { Float32, Float64, Int32, Int64 };

constexpr size_t itemsize(DType t) { return (t == DType::Float32 || t == DType::Int32) ? 4 : 8; }
constexpr bool is_floating(DType t) { return t == DType::Float32 || t == DType::Float64; }

constexpr std::string_view name(DType t) {
  switch (t) {
    case DType::Float32:
      return "float32";
    case DType::Float64:
      return "float64";
    case DType::Int32:
      return "int32";
    case DType::Int64:
      return "int64";
  }
  return "?";
}

template <class T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::Float32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::Float64; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::Int32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::Int64; };

}  // namespace encore

namespace encore {

/// Calls `f.template operator()<T>()` with T the C++ type of `t`.
template <class F> decltype(auto) visit_dtype(DType t, F&& f) {
  switch (t) {
    case DType::Float32:
      return f.template operator()<float>();
    case DType::Float64:
      return f.template operator()<double>();
    case DType::Int32:
      return f.template operator()<int32_t>();
    case DType::Int64:
      break;
  }
  return f.template operator()<int64_t>();
}

/// As visit_dtype, for kernels that exist only for floating types (shape inference has
/// already rejected the others).
template <class F> decltype(auto) visit_float(DType t, F&& f) {
  if (t == DType::Float64) return f.template operator()<double>();
  return f.template operator()<float>();
}

}  // namespace encore
