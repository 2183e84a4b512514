// Reductions over a set of axes (bitmask), with keepdim.
#include "ops/defs/common.h"

namespace encore {
namespace {

Shape reduced_shape(const Shape& s, uint32_t axes, bool keepdim) {
  Shape out;
  for (int i = 0; i < s.size(); ++i) {
    if (!(axes >> i & 1u)) out.push_back(s[i]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

template <OpId Op> int infer_reduce(std::span<const Tensor> in, const Attrs& a, TensorMeta* out) {
  const auto& r = std::get<ReduceAttrs>(a);
  ENCORE_CHECK(r.axes >> in[0].dim() == 0, ShapeError, "[", op_name(Op),
               "] reduction axes out of range for ", describe(in[0]));
  if constexpr (Op == OpId::max) {
    for (int i = 0; i < in[0].dim(); ++i)
      ENCORE_CHECK(!(r.axes >> i & 1u) || in[0].shape()[i] > 0, ShapeError,
                   "[max] cannot reduce the empty axis ", i, " of ", describe(in[0]));
  }
  out[0] = defs::meta(reduced_shape(in[0].shape(), r.axes, r.keepdim), in[0].dtype(), in[0].device());
  return 1;
}

// The gradient of a reduction has the reduced shape; bring it back to keepdim form.
Tensor keepdim_view(const Tensor& g, const Shape& in_shape, const ReduceAttrs& r) {
  return r.keepdim ? g : g.reshape(reduced_shape(in_shape, r.axes, true));
}

void bw_sum(const BackwardCtx& c, Tensor* g) {
  const auto& r = std::get<ReduceAttrs>(c.attrs);
  g[0] = keepdim_view(c.grads[0], c.input_shape(0), r).expand(c.input_shape(0));
}

// Ties share the gradient equally, as in TensorFlow.
void bw_max(const BackwardCtx& c, Tensor* g) {
  const auto& r = std::get<ReduceAttrs>(c.attrs);
  const Shape& s = c.input_shape(0);
  const Tensor mask = eq(c.inputs[0], keepdim_view(c.outputs[0], s, r));
  std::vector<int64_t> axes;
  for (int i = 0; i < s.size(); ++i)
    if (r.axes >> i & 1u) axes.push_back(i);
  g[0] = mask * (keepdim_view(c.grads[0], s, r) / sum(mask, axes, true));
}

}  // namespace

void define_reduce_ops() {
  OpDef& s = defs::define(OpId::sum);
  s.infer = infer_reduce<OpId::sum>;
  s.backward = bw_sum;
  OpDef& m = defs::define(OpId::max);
  m.infer = infer_reduce<OpId::max>;
  m.backward = bw_max;
  m.save_inputs = m.save_outputs = true;
}

}  // namespace encore
