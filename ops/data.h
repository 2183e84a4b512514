// Views, copies, conversions and concatenation: their attributes, shared by the CPU and CUDA
// kernels.
#pragma once

#include <string>

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/shape.h"

namespace encore {

struct ReshapeAttrs {
  Shape shape;
  std::string str() const { return "shape=" + shape.str(); }
  bool operator==(const ReshapeAttrs&) const = default;
};
struct PermuteAttrs {
  Dims order;
  std::string str() const { return "order=" + order.str(); }
  bool operator==(const PermuteAttrs&) const = default;
};
/// slice, and slice_grad, which scatters into zeros of `input_shape`.
struct SliceAttrs {
  int axis;
  int64_t start, stop, step;
  Shape input_shape;
  std::string str() const {
    return detail::cat("axis=", axis, ", ", start, ":", stop,
                       step != 1 ? detail::cat(":", step) : "");
  }
  bool operator==(const SliceAttrs&) const = default;
};
struct ExpandAttrs {
  Shape shape;
  std::string str() const { return "shape=" + shape.str(); }
  bool operator==(const ExpandAttrs&) const = default;
};
struct CastAttrs {
  DType dtype;
  std::string str() const { return "dtype=" + std::string(name(dtype)); }
  bool operator==(const CastAttrs&) const = default;
};
struct DeviceAttrs {
  Device device;
  std::string str() const { return "device=" + device.str(); }
  bool operator==(const DeviceAttrs&) const = default;
};
/// concat, flip, softmax, log_softmax.
struct AxisAttrs {
  int axis;
  std::string str() const { return detail::cat("axis=", axis); }
  bool operator==(const AxisAttrs&) const = default;
};

}  // namespace encore
