// CPU kernels for full, arange, uniform and normal.
#include <cmath>

#include "ops/cpu/kernels.h"
#include "ops/functors.h"
#include "ops/philox.h"

namespace encore::cpu {
namespace {

void full_kernel(const KernelCtx& c) {
  const Scalar& v = std::get<FullAttrs>(c.attrs).value;
  visit_dtype(c.out[0].dtype, [&]<class T>() {
    T* out = c.out[0].ptr<T>();
    const int64_t n = c.out[0].numel();
    const T value = fn::scalar_as<T>(v);
    for (int64_t i = 0; i < n; ++i) out[i] = value;
  });
}

// Integral start and step count exactly in int64 (every value lies between start and stop, so
// the wrapped product is the exact one); others in double.
void arange_kernel(const KernelCtx& c) {
  const auto& a = std::get<FullAttrs>(c.attrs);
  const bool exact = a.value.integral && a.step.integral;
  visit_dtype(c.out[0].dtype, [&]<class T>() {
    T* out = c.out[0].ptr<T>();
    const int64_t n = c.out[0].numel();
    for (int64_t i = 0; i < n; ++i)
      out[i] = exact ? static_cast<T>(fn::wrap_add(a.value.i, fn::wrap_mul(a.step.i, i)))
                     : fn::cast_value<T>(a.value.d + a.step.d * static_cast<double>(i));
  });
}

void uniform_kernel(const KernelCtx& c) {
  const auto& a = std::get<FullAttrs>(c.attrs);
  int64_t* state = c.in[0].ptr<int64_t>();
  const uint64_t seed = state[0], offset = state[1];
  const int64_t n = c.out[0].numel();
  visit_float(c.out[0].dtype, [&]<class T>() {
    T* out = c.out[0].ptr<T>();
    for (int64_t i = 0; i < n; ++i)
      out[i] = static_cast<T>(a.value.d + (a.step.d - a.value.d) * uniform01(philox_value(seed, offset, i)));
  });
  state[1] = static_cast<int64_t>(offset + philox_blocks(n));
}

// Box-Muller on value pairs (2i, 2i + 1) of the stream.
void normal_kernel(const KernelCtx& c) {
  const auto& a = std::get<FullAttrs>(c.attrs);
  int64_t* state = c.in[0].ptr<int64_t>();
  const uint64_t seed = state[0], offset = state[1];
  const int64_t n = c.out[0].numel();
  visit_float(c.out[0].dtype, [&]<class T>() {
    T* out = c.out[0].ptr<T>();
    for (int64_t i = 0; i < n; ++i) {
      const double u1 = (philox_value(seed, offset, 2 * i) + 1.0) / 4294967296.0;
      const double u2 = philox_value(seed, offset, 2 * i + 1) / 4294967296.0;
      out[i] = static_cast<T>(a.value.d + a.step.d * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
    }
  });
  state[1] = static_cast<int64_t>(offset + philox_blocks(2 * n));
}

}  // namespace

void register_creation() {
  set_kernel(OpId::full, full_kernel);
  set_kernel(OpId::arange, arange_kernel);
  set_kernel(OpId::uniform, uniform_kernel);
  set_kernel(OpId::normal, normal_kernel);
}

}  // namespace encore::cpu
