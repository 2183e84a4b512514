// Shared test utilities.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/tensor.h"
#include "ops/ops.h"
#include "ops/random.h"

namespace encore::test {

/// Random float64 values in [-1, 1) (never zeros) from a fixed seed.
inline Tensor rand64(const Shape& shape, uint64_t seed = 1) {
  Generator g(seed);
  return uniform(shape, -1.0, 1.0, DType::Float64, Device::cpu(), &g);
}
inline Tensor rand32(const Shape& shape, uint64_t seed = 1) {
  Generator g(seed);
  return uniform(shape, -1.0, 1.0, DType::Float32, Device::cpu(), &g);
}

/// Max |a - b| after converting both to float64 on the CPU; shapes must match.
inline double max_abs_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape()) << a.shape().str() << " vs " << b.shape().str();
  if (!(a.shape() == b.shape())) return INFINITY;
  const auto x = a.to_vector<double>(), y = b.to_vector<double>();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) != std::isnan(y[i])) return INFINITY;  // std::max would drop a NaN
    m = std::max(m, std::fabs(x[i] - y[i]));
  }
  return m;
}

inline void expect_values(const Tensor& t, const std::vector<double>& expected, double tol = 1e-6) {
  const auto v = t.to_vector<double>();
  ASSERT_EQ(v.size(), expected.size());
  for (size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(v[i], expected[i], tol) << "at " << i;
}

/// The GPU the CUDA tests run on; they start with REQUIRE_CUDA().
inline const Device kGpu = Device::cuda(0);
#define REQUIRE_CUDA() \
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device"

inline bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (!(a.shape() == b.shape()) || a.dtype() != b.dtype()) return false;
  const Tensor x = a.to(Device::cpu()).contiguous(), y = b.to(Device::cpu()).contiguous();
  return std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

}  // namespace encore::test
