// Views (reshape, permute, slice, expand), copies and conversions, concat, and the simple
// in-place ops.
#include "ops/defs/common.h"

namespace encore {
namespace {

using defs::meta_like;

// Views: the output geometry is computed from the input's, on the same storage.
TensorMeta view_meta(const Tensor& t) { return {t.shape(), t.strides(), t.offset(), t.dtype(), t.device()}; }

int infer_reshape(std::span<const Tensor> in, const Attrs& a, TensorMeta* out) {
  const Shape& shape = std::get<ReshapeAttrs>(a).shape;
  out[0] = view_meta(in[0]);
  out[0].shape = shape;
  ENCORE_CHECK(checked_numel(shape, "reshape") == in[0].numel() &&
                   view_strides(in[0].shape(), in[0].strides(), shape, out[0].strides),
               ShapeError, "[reshape] cannot view ", describe(in[0]), " as ", shape.str());
  return 1;
}

int infer_permute(std::span<const Tensor> in, const Attrs& a, TensorMeta* out) {
  const Dims& order = std::get<PermuteAttrs>(a).order;
  const int n = in[0].dim();
  uint32_t seen = 0;
  for (int64_t o : order) seen |= 1u << o;
  ENCORE_CHECK(order.size() == n && seen == (1u << n) - 1, ShapeError, "[permute] ", order.str(),
               " is not a permutation of the axes of ", describe(in[0]));
  out[0] = view_meta(in[0]);
  for (int i = 0; i < n; ++i) {
    out[0].shape[i] = in[0].shape()[order[i]];
    out[0].strides[i] = in[0].strides()[order[i]];
  }
  return 1;
}

int infer_slice(std::span<const Tensor> in, const Attrs& a, TensorMeta* out) {
  const auto& s = std::get<SliceAttrs>(a);
  out[0] = view_meta(in[0]);
  // ceil((stop - start) / step) without forming stop - start + step, which overflows for huge steps.
  const int64_t len = s.stop > s.start ? (s.stop - s.start - 1) / s.step + 1 : 0;
  out[0].shape[s.axis] = len;
  // With two or more elements stride * step stays within the axis; with one the stride does
  // not matter (and multiplying by a huge step would overflow).
  if (len > 1) out[0].strides[s.axis] *= s.step;
  if (len > 0) out[0].offset += s.start * in[0].strides()[s.axis];
  return 1;
}

int infer_expand(std::span<const Tensor> in, const Attrs& a, TensorMeta* out) {
  const Shape& shape = std::get<ExpandAttrs>(a).shape;
  const Tensor& x = in[0];
  ENCORE_CHECK(shape.size() >= x.dim(), ShapeError, "[expand] cannot expand ", describe(x), " to ",
               shape.str());
  out[0] = view_meta(x);
  out[0].shape = shape;
  out[0].strides = Dims::filled(shape.size(), 0);
  const int off = shape.size() - x.dim();
  for (int i = 0; i < x.dim(); ++i) {
    ENCORE_CHECK(x.shape()[i] == shape[off + i] || x.shape()[i] == 1, ShapeError,
                 "[expand] cannot expand ", describe(x), " to ", shape.str());
    out[0].strides[off + i] = x.shape()[i] == 1 && shape[off + i] != 1 ? 0 : x.strides()[i];
  }
  return 1;
}

void bw_reshape(const BackwardCtx& c, Tensor* g) { g[0] = c.grads[0].reshape(c.input_shape(0)); }
void bw_permute(const BackwardCtx& c, Tensor* g) {
  const Dims& order = std::get<PermuteAttrs>(c.attrs).order;
  std::vector<int64_t> inverse(order.size());
  for (int i = 0; i < order.size(); ++i) inverse[order[i]] = i;
  g[0] = c.grads[0].permute(inverse);
}
void bw_slice(const BackwardCtx& c, Tensor* g) {
  g[0] = call(OpId::slice_grad, {c.grads[0]}, c.attrs);
}
void bw_expand(const BackwardCtx& c, Tensor* g) { g[0] = sum_to(c.grads[0], c.input_shape(0)); }

int infer_same(std::span<const Tensor> in, const Attrs&, TensorMeta* out) {
  out[0] = meta_like(in[0]);
  return 1;
}
void bw_identity(const BackwardCtx& c, Tensor* g) { g[0] = c.grads[0]; }

int infer_cast(std::span<const Tensor> in, const Attrs& a, TensorMeta* out) {
  out[0] = meta_like(in[0]);
  out[0].dtype = std::get<CastAttrs>(a).dtype;
  return 1;
}
void bw_cast(const BackwardCtx& c, Tensor* g) { g[0] = c.grads[0].to(c.input_metas[0].dtype); }

int infer_to_device(std::span<const Tensor> in, const Attrs& a, TensorMeta* out) {
  out[0] = meta_like(in[0]);
  out[0].device = std::get<DeviceAttrs>(a).device;
  return 1;
}
void bw_to_device(const BackwardCtx& c, Tensor* g) { g[0] = c.grads[0].to(c.input_metas[0].device); }

int infer_concat(std::span<const Tensor> in, const Attrs& a, TensorMeta* out) {
  const int axis = std::get<AxisAttrs>(a).axis;
  Shape shape = in[0].shape();
  ENCORE_CHECK(axis >= 0 && axis < shape.size(), ShapeError, "[concat] axis ", axis,
               " out of range for ", describe(in[0]));
  for (size_t i = 1; i < in.size(); ++i) {
    defs::require_same_dtype("concat", in[0], in[i]);
    bool ok = in[i].dim() == shape.size();
    for (int d = 0; ok && d < shape.size(); ++d) ok = d == axis || in[i].shape()[d] == shape[d];
    ENCORE_CHECK(ok, ShapeError, "[concat] input ", i, " ", describe(in[i]),
                 " does not match input 0 ", describe(in[0]), " outside axis ", axis);
    ENCORE_CHECK(!__builtin_add_overflow(shape[axis], in[i].shape()[axis], &shape[axis]), ShapeError,
                 "[concat] the inputs' sizes along axis ", axis, " overflow int64");
  }
  out[0] = defs::meta(shape, in[0].dtype(), in[0].device());
  return 1;
}
void bw_concat(const BackwardCtx& c, Tensor* g) {
  const int axis = std::get<AxisAttrs>(c.attrs).axis;
  int64_t start = 0;
  for (size_t i = 0; i < c.input_metas.size(); ++i) {
    const int64_t len = c.input_metas[i].shape[axis];
    if (c.need(i)) g[i] = c.grads[0].slice(axis, start, start + len);
    start += len;
  }
}

int infer_slice_grad(std::span<const Tensor> in, const Attrs& a, TensorMeta* out) {
  out[0] = defs::meta(std::get<SliceAttrs>(a).input_shape, in[0].dtype(), in[0].device());
  return 1;
}
void bw_slice_grad(const BackwardCtx& c, Tensor* g) {
  const auto& s = std::get<SliceAttrs>(c.attrs);
  g[0] = c.grads[0].slice(s.axis, s.start, s.stop, s.step);
}

int infer_flip(std::span<const Tensor> in, const Attrs& a, TensorMeta* out) {
  const int axis = std::get<AxisAttrs>(a).axis;
  ENCORE_CHECK(axis >= 0 && axis < in[0].dim(), ShapeError, "[flip] axis ", axis, " out of range for ",
               describe(in[0]));
  out[0] = meta_like(in[0]);
  return 1;
}
void bw_flip(const BackwardCtx& c, Tensor* g) {
  g[0] = flip(c.grads[0], std::get<AxisAttrs>(c.attrs).axis);
}

// In place: input 0 is written; input 1 (if any) broadcasts to it.
template <OpId Op> int infer_inplace_binary(std::span<const Tensor> in, const Attrs&, TensorMeta*) {
  const char* name = op_name(Op);
  defs::require_same_dtype(name, in[0], in[1]);
  ENCORE_CHECK(broadcast_shapes(in[0].shape(), in[1].shape(), name) == in[0].shape(), ShapeError,
               "[", name, "] ", describe(in[1]), " cannot be broadcast into ", describe(in[0]));
  return 0;
}
template <OpId Op> int infer_inplace_unary(std::span<const Tensor> in, const Attrs& attrs, TensorMeta*) {
  defs::check_scalars(op_name(Op), attrs, in[0].dtype());
  return 0;
}

}  // namespace

void define_data_ops() {
  struct ViewDef {
    OpId op;
    InferFn infer;
    BackwardFn backward;
  };
  for (const ViewDef& v : {ViewDef{OpId::reshape, infer_reshape, bw_reshape},
                           ViewDef{OpId::permute, infer_permute, bw_permute},
                           ViewDef{OpId::slice, infer_slice, bw_slice},
                           ViewDef{OpId::expand, infer_expand, bw_expand}}) {
    OpDef& d = defs::define(v.op);
    d.kind = OpKind::View;
    d.infer = v.infer;
    d.backward = v.backward;
  }
  OpDef& copy = defs::define(OpId::copy);
  copy.infer = infer_same;
  copy.backward = bw_identity;
  OpDef& cast = defs::define(OpId::cast);
  cast.infer = infer_cast;
  cast.backward = bw_cast;
  OpDef& to_device = defs::define(OpId::to_device);
  to_device.infer = infer_to_device;
  to_device.backward = bw_to_device;
  to_device.mixed_devices = true;
  OpDef& concat = defs::define(OpId::concat);
  concat.infer = infer_concat;
  concat.backward = bw_concat;
  concat.max_inputs = -1;
  OpDef& fl = defs::define(OpId::flip);
  fl.infer = infer_flip;
  fl.backward = bw_flip;
  OpDef& slice_grad = defs::define(OpId::slice_grad);
  slice_grad.infer = infer_slice_grad;
  slice_grad.backward = bw_slice_grad;

  for (auto [op, infer] : {std::pair<OpId, InferFn>{OpId::copy_, infer_inplace_binary<OpId::copy_>},
                           std::pair<OpId, InferFn>{OpId::add_, infer_inplace_binary<OpId::add_>}}) {
    OpDef& d = defs::define(op);
    d.kind = OpKind::InPlace;
    d.min_inputs = d.max_inputs = 2;
    d.mutates = 1;
    d.infer = infer;
  }
  for (auto [op, infer] : {std::pair<OpId, InferFn>{OpId::fill_, infer_inplace_unary<OpId::fill_>},
                           std::pair<OpId, InferFn>{OpId::add_scalar_, infer_inplace_unary<OpId::add_scalar_>}}) {
    OpDef& d = defs::define(op);
    d.kind = OpKind::InPlace;
    d.mutates = 1;
    d.infer = infer;
  }
}

}  // namespace encore
