// Normalization as compositions: batch_norm (given statistics, what BatchNormalization applies
// with the batch's or the moving ones) and layer_norm (the statistics of each sample), both
// with Keras' optional scale (gamma) and offset (beta) along one axis.
#include "ops/defs/common.h"

namespace encore {
namespace {

// A per-channel tensor (channels,) shaped to broadcast along `axis` of x.
Tensor along(const Tensor& v, const Tensor& x, int axis, const char* op, const char* what) {
  ENCORE_CHECK(v.dim() == 1 && v.shape()[0] == x.shape()[axis], ShapeError, "[", op, "] ", what,
               " ", describe(v), " must be (", x.shape()[axis], ",) for axis ", axis, " of ",
               describe(x));
  defs::require_same_dtype(op, x, v);
  ENCORE_CHECK(v.device() == x.device(), DeviceError, "[", op, "] ", what, " ", describe(v),
               " and x ", describe(x), " are on different devices");
  Shape s = Shape::filled(x.dim(), 1);
  s[axis] = x.shape()[axis];
  return v.reshape(s);
}

// x * inv_std (scaled by gamma) + offset (- mean * that scale, + beta): the form Keras computes.
Tensor normalize(const Tensor& x, const Tensor& mean, const Tensor& variance, const Tensor& gamma,
                 const Tensor& beta, double epsilon) {
  Tensor scale = pow(variance + epsilon, -0.5);
  if (gamma.defined()) scale = scale * gamma;
  Tensor offset = neg(mean) * scale;
  if (beta.defined()) offset = offset + beta;
  return x * scale + offset;
}

int checked_axis(const char* op, const Tensor& x, int64_t axis, double epsilon) {
  ENCORE_CHECK(x.defined(), ValueError, "[", op, "] undefined input");
  defs::require_float(op, x);
  ENCORE_CHECK(x.dim() >= 1, ShapeError, "[", op, "] needs at least one axis, got ", describe(x));
  ENCORE_CHECK(epsilon > 0, ValueError, "[", op, "] epsilon must be > 0, got ", epsilon);
  return normalize_axis(axis, x.dim(), op);
}

OpDef& batch_norm_op = define_op({
    .name = "batch_norm",
    .kind = OpKind::Composite,
    .signature =
        "batch_norm(x: Tensor, mean: Tensor, variance: Tensor, gamma: Tensor | None = None, "
        "beta: Tensor | None = None, axis: int = -1, epsilon: float = 0.001) -> Tensor",
    .invoke = [](const CallArgs& a) -> Outputs {
      return {batch_norm(a.tensor(0), a.tensor(1), a.tensor(2),
                         a.optional_tensor(3).value_or(Tensor()),
                         a.optional_tensor(4).value_or(Tensor()), a.integer(5), a.real(6))};
    },
    .doc = "(x - mean) / sqrt(variance + epsilon) * gamma + beta with per-channel statistics "
           "(channels,) along "
           "`axis`, as Keras' BatchNormalization applies them",
    .examples = {{.inputs = {{{2, 3, 4}}, {{4}}, {{4}, ExampleInput::Positive}, {{4}}, {{4}}}}},
});
OpDef& moments_op = define_op({
    .name = "moments",
    .kind = OpKind::Composite,
    .signature = "moments(x: Tensor, axes: tuple[int, ...], keepdims: bool = False) -> "
                 "tuple[Tensor, Tensor]",
    .invoke = [](const CallArgs& a) -> Outputs {
      const auto [mean, variance] = moments(a.tensor(0), a.integers(1), a.boolean(2));
      return {mean, variance};
    },
    .doc = "Keras ops.moments: the mean and the biased variance (divided by the count, not count - "
           "1) over `axes`",
    .examples = {{.inputs = {{{2, 3, 4}}}, .args = "axes=(0, 1)"}},
});
OpDef& layer_norm_op = define_op({
    .name = "layer_norm",
    .kind = OpKind::Composite,
    .signature = "layer_norm(x: Tensor, gamma: Tensor | None = None, beta: Tensor | None = None, "
                 "axis: int = -1, "
                 "epsilon: float = 0.001) -> Tensor",
    .invoke = [](const CallArgs& a) -> Outputs {
      return {layer_norm(a.tensor(0), a.optional_tensor(1).value_or(Tensor()),
                         a.optional_tensor(2).value_or(Tensor()), a.integer(3), a.real(4))};
    },
    .doc = "Keras LayerNormalization: each sample normalized by its mean and (biased) variance "
           "along `axis`, "
           "then scaled by gamma and offset by beta (channels,)",
    .examples = {{.inputs = {{{2, 3, 4}}, {{4}}, {{4}}}}},
});

}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& mean, const Tensor& variance, const Tensor& gamma,
                  const Tensor& beta, int64_t axis, double epsilon) {
  const int ax = checked_axis("batch_norm", x, axis, epsilon);
  ENCORE_CHECK(mean.defined() && variance.defined(), ValueError,
               "[batch_norm] needs the mean and the variance");
  const char* op = "batch_norm";
  return normalize(x, along(mean, x, ax, op, "mean"), along(variance, x, ax, op, "variance"),
                   gamma.defined() ? along(gamma, x, ax, op, "gamma") : Tensor(),
                   beta.defined() ? along(beta, x, ax, op, "beta") : Tensor(), epsilon);
}

std::pair<Tensor, Tensor> moments(const Tensor& x, const std::vector<int64_t>& axes,
                                  bool keepdims) {
  ENCORE_CHECK(x.defined(), ValueError, "[moments] undefined input");
  defs::require_float("moments", x);
  ENCORE_CHECK(!axes.empty(), ValueError,
               "[moments] an empty axis list reduces nothing; give the axes to reduce");
  // Two passes (the mean, then the squares around it): E[x^2] - E[x]^2 would cancel.
  const Tensor mean = encore::mean(x, axes, true);
  const Tensor centered = x - mean;
  const Tensor variance = encore::mean(centered * centered, axes, keepdims);
  return {keepdims ? mean : mean.reshape(variance.shape()), variance};
}

Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, int64_t axis,
                  double epsilon) {
  const int ax = checked_axis("layer_norm", x, axis, epsilon);
  const char* op = "layer_norm";
  const Tensor g = gamma.defined() ? along(gamma, x, ax, op, "gamma") : Tensor();
  const Tensor b = beta.defined() ? along(beta, x, ax, op, "beta") : Tensor();
  const auto [mean, variance] = moments(x, {ax}, true);
  return normalize(x, mean, variance, g, b, epsilon);
}

}  // namespace encore
