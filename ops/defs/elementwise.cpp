// Elementwise ops: shape inference (broadcasting, dtype rules) and backward formulas.
#include "ops/defs/common.h"
#include "ops/elementwise.h"

namespace encore {
namespace {

using defs::meta_like;

const Scalar& scalar(const Attrs& a) { return std::get<ScalarAttrs>(a).value; }

template <OpId Op, DTypeClass C>
int infer_unary(std::span<const Tensor> in, const Attrs& attrs, TensorMeta* out) {
  if constexpr (C == DTypeClass::Float) defs::require_float(op_name(Op), in[0]);
  else defs::check_scalars(op_name(Op), attrs, in[0].dtype());
  out[0] = meta_like(in[0]);
  return 1;
}

template <OpId Op> int infer_binary(std::span<const Tensor> in, const Attrs&, TensorMeta* out) {
  const char* n = op_name(Op);
  defs::require_same_dtype(n, in[0], in[1]);
  out[0] = defs::meta(broadcast_shapes(in[0].shape(), in[1].shape(), n), in[0].dtype(), in[0].device());
  return 1;
}

// d/dx of each one-input op, written with public ops.
void bw_neg(const BackwardCtx& c, Tensor* g) { g[0] = neg(c.grads[0]); }
void bw_exp(const BackwardCtx& c, Tensor* g) { g[0] = c.grads[0] * c.outputs[0]; }
void bw_log(const BackwardCtx& c, Tensor* g) { g[0] = c.grads[0] / c.inputs[0]; }
void bw_sqrt(const BackwardCtx& c, Tensor* g) { g[0] = c.grads[0] / (c.outputs[0] * 2.0); }
void bw_tanh(const BackwardCtx& c, Tensor* g) {
  g[0] = c.grads[0] * (1.0 - c.outputs[0] * c.outputs[0]);
}
void bw_sigmoid(const BackwardCtx& c, Tensor* g) {
  g[0] = c.grads[0] * (c.outputs[0] * (1.0 - c.outputs[0]));
}
void bw_relu(const BackwardCtx& c, Tensor* g) { g[0] = c.grads[0] * gt(c.inputs[0], 0.0); }
void bw_abs(const BackwardCtx& c, Tensor* g) {
  g[0] = c.grads[0] * (gt(c.inputs[0], 0.0) - lt(c.inputs[0], 0.0));
}
void bw_softplus(const BackwardCtx& c, Tensor* g) { g[0] = c.grads[0] * sigmoid(c.inputs[0]); }
void bw_leaky_relu(const BackwardCtx& c, Tensor* g) {
  const double alpha = scalar(c.attrs).d;
  g[0] = c.grads[0] * (gt(c.inputs[0], 0.0) * (1.0 - alpha) + alpha);
}
void bw_pow_scalar(const BackwardCtx& c, Tensor* g) {
  const double p = scalar(c.attrs).d;
  g[0] = c.grads[0] * (pow(c.inputs[0], p - 1.0) * p);
}
void bw_add_scalar(const BackwardCtx& c, Tensor* g) { g[0] = c.grads[0]; }
void bw_mul_scalar(const BackwardCtx& c, Tensor* g) { g[0] = c.grads[0] * scalar(c.attrs); }
void bw_clip(const BackwardCtx& c, Tensor* g) {
  const auto& a = std::get<ClipAttrs>(c.attrs);
  const Tensor& x = c.inputs[0];
  g[0] = c.grads[0] * (ge(x, full_like(x, a.lo)) * le(x, full_like(x, a.hi)));
}

void bw_add(const BackwardCtx& c, Tensor* g) {
  if (c.need(0)) g[0] = sum_to(c.grads[0], c.input_shape(0));
  if (c.need(1)) g[1] = sum_to(c.grads[0], c.input_shape(1));
}
void bw_sub(const BackwardCtx& c, Tensor* g) {
  if (c.need(0)) g[0] = sum_to(c.grads[0], c.input_shape(0));
  if (c.need(1)) g[1] = sum_to(neg(c.grads[0]), c.input_shape(1));
}
void bw_mul(const BackwardCtx& c, Tensor* g) {
  if (c.need(0)) g[0] = sum_to(c.grads[0] * c.inputs[1], c.input_shape(0));
  if (c.need(1)) g[1] = sum_to(c.grads[0] * c.inputs[0], c.input_shape(1));
}
void bw_div(const BackwardCtx& c, Tensor* g) {
  if (c.need(0)) g[0] = sum_to(c.grads[0] / c.inputs[1], c.input_shape(0));
  if (c.need(1)) g[1] = sum_to(neg(c.grads[0]) * c.outputs[0] / c.inputs[1], c.input_shape(1));
}
// Ties send the whole gradient to the first input.
void bw_maximum(const BackwardCtx& c, Tensor* g) {
  if (c.need(0)) g[0] = sum_to(c.grads[0] * ge(c.inputs[0], c.inputs[1]), c.input_shape(0));
  if (c.need(1)) g[1] = sum_to(c.grads[0] * lt(c.inputs[0], c.inputs[1]), c.input_shape(1));
}
void bw_minimum(const BackwardCtx& c, Tensor* g) {
  if (c.need(0)) g[0] = sum_to(c.grads[0] * le(c.inputs[0], c.inputs[1]), c.input_shape(0));
  if (c.need(1)) g[1] = sum_to(c.grads[0] * gt(c.inputs[0], c.inputs[1]), c.input_shape(1));
}

struct Diff {
  OpId op;
  BackwardFn backward;
  bool save_inputs, save_outputs;
};
constexpr Diff kDiff[] = {
    {OpId::neg, bw_neg, false, false},           {OpId::exp, bw_exp, false, true},
    {OpId::log, bw_log, true, false},            {OpId::sqrt, bw_sqrt, false, true},
    {OpId::tanh, bw_tanh, false, true},          {OpId::sigmoid, bw_sigmoid, false, true},
    {OpId::relu, bw_relu, true, false},          {OpId::abs, bw_abs, true, false},
    {OpId::softplus, bw_softplus, true, false},  {OpId::leaky_relu, bw_leaky_relu, true, false},
    {OpId::pow_scalar, bw_pow_scalar, true, false},
    {OpId::add_scalar, bw_add_scalar, false, false},
    {OpId::mul_scalar, bw_mul_scalar, false, false},
    {OpId::clip, bw_clip, true, false},          {OpId::add, bw_add, false, false},
    {OpId::sub, bw_sub, false, false},           {OpId::mul, bw_mul, true, false},
    {OpId::div, bw_div, true, true},             {OpId::maximum, bw_maximum, true, false},
    {OpId::minimum, bw_minimum, true, false},
};

}  // namespace

void define_elementwise_ops() {
#define ENCORE_DEFINE_UNARY(op, F, cls) defs::define(OpId::op).infer = infer_unary<OpId::op, DTypeClass::cls>;
  ENCORE_UNARY_OPS(ENCORE_DEFINE_UNARY)
#undef ENCORE_DEFINE_UNARY
#define ENCORE_DEFINE_BINARY(op, F, cls)        \
  defs::define(OpId::op).infer = infer_binary<OpId::op>; \
  defs::define(OpId::op).min_inputs = defs::define(OpId::op).max_inputs = 2;
  ENCORE_BINARY_OPS(ENCORE_DEFINE_BINARY)
#undef ENCORE_DEFINE_BINARY
  for (const Diff& d : kDiff) {
    OpDef& def = defs::define(d.op);
    def.backward = d.backward;
    def.save_inputs = d.save_inputs;
    def.save_outputs = d.save_outputs;
  }
}

}  // namespace encore
