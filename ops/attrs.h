// Non-tensor arguments of ops. Each op uses one alternative of `Attrs`; nodes of a traced
// graph and autograd nodes carry a copy, so every alternative stays small and trivially copyable.
#pragma once

#include <string>
#include <variant>

#include "core/device.h"
#include "core/dtype.h"
#include "core/scalar.h"
#include "core/shape.h"

namespace encore {

/// Activations the fused LSTM gate kernel understands (Keras names).
enum class Activation : uint8_t { Linear, Tanh, Sigmoid, Relu, HardSigmoid };
std::string_view name(Activation a);
Activation parse_activation(const std::string& s);

struct NoAttrs {
  std::string str() const { return {}; }
};
struct ScalarAttrs {  // add_scalar, mul_scalar, pow_scalar, leaky_relu (alpha), fill_, add_scalar_
  Scalar value;
  std::string str() const;
};
struct ClipAttrs {
  Scalar lo, hi;
  std::string str() const;
};
struct ReduceAttrs {
  uint32_t axes;  // bit i set: reduce axis i
  bool keepdim;
  std::string str() const;
};
struct AxisAttrs {  // softmax, log_softmax, concat, flip
  int axis;
  std::string str() const;
};
struct ReshapeAttrs {
  Shape shape;
  std::string str() const;
};
struct PermuteAttrs {
  Dims order;
  std::string str() const;
};
struct SliceAttrs {  // also slice_grad, which scatters into zeros of `input_shape`
  int axis;
  int64_t start, stop, step;
  Shape input_shape;
  std::string str() const;
};
struct ExpandAttrs {
  Shape shape;
  std::string str() const;
};
struct CastAttrs {
  DType dtype;
  std::string str() const;
};
struct DeviceAttrs {
  Device device;
  std::string str() const;
};
struct ConvAttrs {
  int64_t stride, dilation, pad_l, pad_r;
  int64_t length;  // conv1d_backward_data: the input length to reconstruct
  int64_t kernel;  // conv1d_backward_filter: the kernel size
  std::string str() const;
};
struct DropoutAttrs {
  double p;
  std::string str() const;
};
struct LstmAttrs {
  Activation activation, recurrent_activation;
  std::string str() const;
};
struct SgdAttrs {
  double momentum, weight_decay;
  bool nesterov;
  std::string str() const;
};
struct AdamAttrs {
  double beta1, beta2, eps, weight_decay;
  bool decoupled_weight_decay = false;  // AdamW: w *= 1 - lr * weight_decay, not g += wd * w
  bool epsilon_hat = false;             // Keras' placement: eps added before bias correction
  std::string str() const;
};
struct RmspropAttrs {
  double rho, momentum, eps;
  bool centered;
  std::string str() const;
};
struct FullAttrs {  // full, arange (start = value, step), uniform (low, high), normal (mean, std)
  Shape shape;
  DType dtype;
  Device device;
  Scalar value, step;
  std::string str() const;
};
struct ScatterAttrs {
  int64_t n;  // size of the last axis to scatter into
  std::string str() const;
};

using Attrs = std::variant<NoAttrs, ScalarAttrs, ClipAttrs, ReduceAttrs, AxisAttrs, ReshapeAttrs,
                           PermuteAttrs, SliceAttrs, ExpandAttrs, CastAttrs, DeviceAttrs, ConvAttrs,
                           DropoutAttrs, LstmAttrs, SgdAttrs, AdamAttrs, RmspropAttrs, FullAttrs,
                           ScatterAttrs>;

std::string str(const Attrs& a);

}  // namespace encore
