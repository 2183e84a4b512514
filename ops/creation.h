// Creation ops: the attributes of full, arange, uniform and normal, shared by the CPU and CUDA
// kernels.
#pragma once

#include <string>

#include "core/device.h"
#include "core/dtype.h"
#include "core/scalar.h"
#include "core/shape.h"

namespace encore {

/// full (value), arange (start = value, step), uniform (low = value, high = step), normal
/// (mean = value, std = step).
struct FullAttrs {
  Shape shape;
  DType dtype;
  Device device;
  Scalar value, step;
  std::string str() const {
    return "shape=" + shape.str() + ", dtype=" + std::string(name(dtype)) + ", a=" + value.str() +
           ", b=" + step.str();
  }
  bool operator==(const FullAttrs&) const = default;
};

}  // namespace encore
