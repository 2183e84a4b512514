// Views (reshape, permute, slice, expand: no kernel, shared storage), copies and conversions,
// concat, flip, and the simple in-place ops: rows, shape inference, backward formulas, CPU
// kernels and the Tensor methods and functions that call them.
// Long: some twenty small ops whose rows share the view and copy helpers above them; split, each
// part would repeat those helpers or export them.
#include <cstring>
#include <numeric>

#include "ops/cpu/loops.h"
#include "ops/data.h"
#include "ops/defs/common.h"
#include "ops/elementwise.h"
#include "ops/strided.h"

namespace encore {
namespace {

using cpu::broadcast_strides;
using cpu::StridedLoop;

const OpDef& slice_grad_op();

// Views: the output geometry is computed from the input's, on the same storage.
TensorMeta view_meta(const Tensor& t) {
  return {t.shape(), t.strides(), t.offset(), t.dtype(), t.device()};
}

int infer_reshape(const OpDef&, std::span<const Tensor> in, const Attrs& a, TensorMeta* out) {
  const Shape& shape = a.as<ReshapeAttrs>().shape;
  out[0] = view_meta(in[0]);
  out[0].shape = shape;
  ENCORE_CHECK(checked_numel(shape, "reshape") == in[0].numel() &&
                   view_strides(in[0].shape(), in[0].strides(), shape, out[0].strides),
               ShapeError, "[reshape] cannot view ", describe(in[0]), " as ", shape.str());
  return 1;
}

int infer_permute(const OpDef&, std::span<const Tensor> in, const Attrs& a, TensorMeta* out) {
  const Dims& order = a.as<PermuteAttrs>().order;
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

int infer_slice(const OpDef&, std::span<const Tensor> in, const Attrs& a, TensorMeta* out) {
  const auto& s = a.as<SliceAttrs>();
  out[0] = view_meta(in[0]);
  // ceil((stop - start) / step) without forming stop - start + step, which overflows for huge
  // steps.
  const int64_t len = s.stop > s.start ? (s.stop - s.start - 1) / s.step + 1 : 0;
  out[0].shape[s.axis] = len;
  // With two or more elements stride * step stays within the axis; with one the stride does
  // not matter (and multiplying by a huge step would overflow).
  if (len > 1) out[0].strides[s.axis] *= s.step;
  if (len > 0) out[0].offset += s.start * in[0].strides()[s.axis];
  return 1;
}

int infer_expand(const OpDef&, std::span<const Tensor> in, const Attrs& a, TensorMeta* out) {
  const Shape& shape = a.as<ExpandAttrs>().shape;
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
  const Dims& order = c.attrs.as<PermuteAttrs>().order;
  std::vector<int64_t> inverse(order.size());
  for (int i = 0; i < order.size(); ++i) inverse[order[i]] = i;
  g[0] = c.grads[0].permute(inverse);
}
void bw_slice(const BackwardCtx& c, Tensor* g) {
  g[0] = call(slice_grad_op(), {c.grads[0]}, c.attrs);
}
void accumulate_slice(const BackwardCtx& c, Tensor& into) {
  const auto& s = c.attrs.as<SliceAttrs>();
  into.slice(s.axis, s.start, s.stop, s.step).add_(c.grads[0]);
}
void bw_expand(const BackwardCtx& c, Tensor* g) { g[0] = sum_to(c.grads[0], c.input_shape(0)); }

int infer_same(const OpDef&, std::span<const Tensor> in, const Attrs&, TensorMeta* out) {
  out[0] = defs::meta_like(in[0]);
  return 1;
}
void bw_identity(const BackwardCtx& c, Tensor* g) { g[0] = c.grads[0]; }

int infer_cast(const OpDef&, std::span<const Tensor> in, const Attrs& a, TensorMeta* out) {
  out[0] = defs::meta_like(in[0]);
  out[0].dtype = a.as<CastAttrs>().dtype;
  return 1;
}
void bw_cast(const BackwardCtx& c, Tensor* g) { g[0] = c.grads[0].to(c.input_metas[0].dtype); }

int infer_to_device(const OpDef&, std::span<const Tensor> in, const Attrs& a, TensorMeta* out) {
  out[0] = defs::meta_like(in[0]);
  out[0].device = a.as<DeviceAttrs>().device;
  return 1;
}
void bw_to_device(const BackwardCtx& c, Tensor* g) {
  g[0] = c.grads[0].to(c.input_metas[0].device);
}

int infer_concat(const OpDef&, std::span<const Tensor> in, const Attrs& a, TensorMeta* out) {
  const int axis = a.as<AxisAttrs>().axis;
  Shape shape = in[0].shape();
  ENCORE_CHECK(axis >= 0 && axis < shape.size(), ShapeError, "[concat] axis ", axis,
               " out of range for ", describe(in[0]));
  for (size_t i = 1; i < in.size(); ++i) {
    defs::require_same_dtype("concat", in[0], in[i]);
    bool ok = in[i].dim() == shape.size();
    for (int d = 0; ok && d < shape.size(); ++d) ok = d == axis || in[i].shape()[d] == shape[d];
    ENCORE_CHECK(ok, ShapeError, "[concat] input ", i, " ", describe(in[i]),
                 " does not match input 0 ", describe(in[0]), " outside axis ", axis);
    ENCORE_CHECK(!__builtin_add_overflow(shape[axis], in[i].shape()[axis], &shape[axis]),
                 ShapeError, "[concat] the inputs' sizes along axis ", axis, " overflow int64");
  }
  out[0] = defs::meta(shape, in[0].dtype(), in[0].device());
  return 1;
}
void bw_concat(const BackwardCtx& c, Tensor* g) {
  const int axis = c.attrs.as<AxisAttrs>().axis;
  int64_t start = 0;
  for (size_t i = 0; i < c.input_metas.size(); ++i) {
    const int64_t len = c.input_metas[i].shape[axis];
    if (c.need(i)) g[i] = c.grads[0].slice(axis, start, start + len);
    start += len;
  }
}

int infer_slice_grad(const OpDef&, std::span<const Tensor> in, const Attrs& a, TensorMeta* out) {
  out[0] = defs::meta(a.as<SliceAttrs>().input_shape, in[0].dtype(), in[0].device());
  return 1;
}
void bw_slice_grad(const BackwardCtx& c, Tensor* g) {
  const auto& s = c.attrs.as<SliceAttrs>();
  g[0] = c.grads[0].slice(s.axis, s.start, s.stop, s.step);
}

int infer_flip(const OpDef&, std::span<const Tensor> in, const Attrs& a, TensorMeta* out) {
  const int axis = a.as<AxisAttrs>().axis;
  ENCORE_CHECK(axis >= 0 && axis < in[0].dim(), ShapeError, "[flip] axis ", axis,
               " out of range for ", describe(in[0]));
  out[0] = defs::meta_like(in[0]);
  return 1;
}
void bw_flip(const BackwardCtx& c, Tensor* g) {
  g[0] = flip(c.grads[0], c.attrs.as<AxisAttrs>().axis);
}

// In place: input 0 is written; input 1 (if any) broadcasts to it.
int infer_inplace_binary(const OpDef& op, std::span<const Tensor> in, const Attrs&, TensorMeta*) {
  const char* name = op.name;
  defs::require_same_dtype(name, in[0], in[1]);
  ENCORE_CHECK(broadcast_shapes(in[0].shape(), in[1].shape(), name) == in[0].shape(), ShapeError,
               "[", name, "] ", describe(in[1]), " cannot be broadcast into ", describe(in[0]));
  return 0;
}
int infer_fill(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs, TensorMeta*) {
  attrs.as<ScalarAttrs>().value.check(in[0].dtype(), op.name);
  return 0;
}
int infer_inplace_scalar(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs,
                         TensorMeta*) {
  attrs.as<ScalarAttrs>().value.check_operand(in[0].dtype(), op.name);
  return 0;
}

// dst[i] = f(dst[i], src[i]) over dst's shape, src broadcast to it.
template <class TD, class TS, class F>
void update(const TensorRef& dst, const TensorRef& src, F f) {
  TD* d = dst.ptr<TD>();
  const TS* s = src.ptr<const TS>();
  const int64_t n = dst.numel();
  if (dst.contiguous() && src.contiguous() && src.numel() == n) {
    for (int64_t i = 0; i < n; ++i) d[i] = f(d[i], s[i]);
    return;
  }
  StridedLoop<2>(dst.shape, {dst.strides, broadcast_strides(src, dst.shape)})
      .run([&](auto off, auto st, int64_t m) {
        TD* __restrict o = d + off[0];
        const TS* __restrict a = s + off[1];
        if (st[0] == 1 && st[1] == 1) {
          for (int64_t i = 0; i < m; ++i) o[i] = f(o[i], a[i]);
        } else if (st[0] == 1 && st[1] == 0) {
          const TS v = *a;
          for (int64_t i = 0; i < m; ++i) o[i] = f(o[i], v);
        } else {
          for (int64_t i = 0; i < m; ++i) o[i * st[0]] = f(o[i * st[0]], a[i * st[1]]);
        }
      });
}

template <class T> void assign(const TensorRef& dst, const TensorRef& src) {
  if (dst.contiguous() && src.contiguous() && src.numel() == dst.numel()) {
    std::memcpy(dst.data, src.data, dst.numel() * sizeof(T));
    return;
  }
  update<T, T>(dst, src, [](T, T s) { return s; });
}

void copy_kernel(const KernelCtx& c) {
  visit_dtype(c.in[0].dtype, [&]<class T>() { assign<T>(c.out[0], c.in[0]); });
}

void copy_inplace_kernel(const KernelCtx& c) {
  visit_dtype(c.in[0].dtype, [&]<class T>() { assign<T>(c.in[0], c.in[1]); });
}

void add_inplace_kernel(const KernelCtx& c) {
  visit_dtype(c.in[0].dtype, [&]<class T>() {
    update<T, T>(c.in[0], c.in[1], [](T d, T s) { return fn::wrap_add(d, s); });
  });
}

void cast_kernel(const KernelCtx& c) {
  visit_dtype(c.in[0].dtype, [&]<class TS>() {
    visit_dtype(c.out[0].dtype, [&]<class TD>() {
      update<TD, TS>(c.out[0], c.in[0], [](TD, TS s) { return fn::cast_value<TD>(s); });
    });
  });
}

void fill_kernel(const KernelCtx& c) {
  const Scalar& v = c.attrs.as<ScalarAttrs>().value;
  const TensorRef& t = c.in[0];
  visit_dtype(t.dtype, [&]<class T>() {
    const T value = fn::scalar_as<T>(v);
    TensorRef scalar{const_cast<T*>(&value), {}, {}, t.dtype, t.device};
    update<T, T>(t, scalar, [](T, T s) { return s; });
  });
}

void add_scalar_inplace_kernel(const KernelCtx& c) {
  const Scalar& v = c.attrs.as<ScalarAttrs>().value;
  const TensorRef& t = c.in[0];
  visit_dtype(t.dtype, [&]<class T>() {
    const T value = fn::scalar_as<T>(v);
    TensorRef scalar{const_cast<T*>(&value), {}, {}, t.dtype, t.device};
    update<T, T>(t, scalar, [](T d, T s) { return fn::wrap_add(d, s); });
  });
}

void concat_kernel(const KernelCtx& c) {
  const int axis = c.attrs.as<AxisAttrs>().axis;
  int64_t start = 0;
  visit_dtype(c.out[0].dtype, [&]<class T>() {
    for (const TensorRef& x : c.in) {
      assign<T>(sub_view(c.out[0], axis, start, x.shape, 1), x);
      start += x.shape[axis];
    }
  });
}

void slice_grad_kernel(const KernelCtx& c) {
  const auto& s = c.attrs.as<SliceAttrs>();
  std::memset(c.out[0].data, 0, c.out[0].numel() * itemsize(c.out[0].dtype));
  if (c.in[0].numel() == 0) return;
  visit_dtype(c.out[0].dtype, [&]<class T>() {
    assign<T>(sub_view(c.out[0], s.axis, s.start, c.in[0].shape, s.step), c.in[0]);
  });
}

void flip_kernel(const KernelCtx& c) {
  const int axis = c.attrs.as<AxisAttrs>().axis;
  TensorRef src = c.in[0];
  const int64_t n = src.shape[axis];
  if (n == 0) return;
  // Read the input backwards along `axis`: start at its last entry with a negated stride.
  src.data = static_cast<char*>(src.data) + (n - 1) * src.strides[axis] * itemsize(src.dtype);
  src.strides[axis] = -src.strides[axis];
  visit_dtype(src.dtype, [&]<class T>() { update<T, T>(c.out[0], src, [](T, T s) { return s; }); });
}

Outputs one(const Tensor& t) { return {t}; }

// ---- views -----------------------------------------------------------------------------
OpDef& reshape_op = define_op({
    .name = "reshape",
    .kind = OpKind::View,
    .attrs = &attrs_of<ReshapeAttrs>,
    .infer = infer_reshape,
    .backward = bw_reshape,
    .signature = "reshape(x: Tensor, shape: tuple[int, ...]) -> Tensor",
    .invoke = [](const CallArgs& a) { return one(a.tensor(0).reshape(Shape(a.integers(1)))); },
    .examples = {{.inputs = {{{2, 3, 4}}}, .args = "shape=(4, -1)"}},
});
OpDef& permute_op = define_op({
    .name = "permute",
    .kind = OpKind::View,
    .attrs = &attrs_of<PermuteAttrs>,
    .infer = infer_permute,
    .backward = bw_permute,
    .signature = "permute(x: Tensor, order: tuple[int, ...]) -> Tensor",
    .invoke = [](const CallArgs& a) { return one(a.tensor(0).permute(a.integers(1))); },
    .examples = {{.inputs = {{{2, 3, 4}}}, .args = "order=(2, 0, 1)"}},
});
OpDef& transpose_op = define_op({
    .name = "transpose",
    .kind = OpKind::Composite,
    .signature = "transpose(x: Tensor, axis0: int, axis1: int) -> Tensor",
    .invoke =
        [](const CallArgs& a) { return one(a.tensor(0).transpose(a.integer(1), a.integer(2))); },
    .examples = {{.inputs = {{{2, 3, 4}}}, .args = "axis0=0, axis1=-1"}},
});
OpDef& slice_op = define_op({
    .name = "slice",
    .kind = OpKind::View,
    .attrs = &attrs_of<SliceAttrs>,
    .infer = infer_slice,
    .backward = bw_slice,
    .accumulate = accumulate_slice,
    .examples = {{.inputs = {{{3, 7}}},
                  .call = [](std::span<const Tensor> x) { return one(x[0].slice(1, 1, 6, 2)); }}},
});
OpDef& expand_op = define_op({
    .name = "expand",
    .kind = OpKind::View,
    .attrs = &attrs_of<ExpandAttrs>,
    .infer = infer_expand,
    .backward = bw_expand,
    .examples = {{.inputs = {{{3, 1}}},
                  .call =
                      [](std::span<const Tensor> x) {
                        return one(x[0].expand({2, 3, 4}));
                      }}},
});

// ---- copies and conversions ------------------------------------------------------------
OpDef& copy_op = define_op({
    .name = "copy",
    .infer = infer_same,
    .backward = bw_identity,
    .cpu = {copy_kernel},
    .examples = {{.inputs = {{{3, 4}}},
                  .call =
                      [](std::span<const Tensor> x) { return one(x[0].transpose(0, 1).clone()); }}},
});
OpDef& cast_op = define_op({
    .name = "cast",
    .attrs = &attrs_of<CastAttrs>,
    .infer = infer_cast,
    .backward = bw_cast,
    .cpu = {cast_kernel},
    .examples = {{.inputs = {{{3, 4}}},
                  .call =
                      [](std::span<const Tensor> x) {
                        return one(x[0].to(DType::Float32).to(DType::Float64));
                      },
                  .gradcheck_eps = 1e-2}},
});
// A transfer runs on the accelerator side, which can address both memories; CPU to CPU is a copy.
OpDef& to_device_op = define_op({
    .name = "to_device",
    .mixed_devices = true,
    .attrs = &attrs_of<DeviceAttrs>,
    .infer = infer_to_device,
    .backward = bw_to_device,
    .cpu = {copy_kernel},
    .examples = {{.inputs = {{{3, 4}}},
                  .call =
                      [](std::span<const Tensor> x) { return one(x[0].to(Device::cpu()) * 1.0); }}},
});
OpDef& concat_op = define_op({
    .name = "concat",
    .max_inputs = -1,
    .attrs = &attrs_of<AxisAttrs>,
    .infer = infer_concat,
    .backward = bw_concat,
    .cpu = {concat_kernel},
    .signature = "concat(tensors: list[Tensor], axis: int = 0) -> Tensor",
    .invoke = [](const CallArgs& a) { return one(concat(a.tensors(0), a.integer(1))); },
    .examples = {{.inputs = {{{2, 3}}, {{2, 1}}, {{2, 2}}}, .args = "axis=1"},
                 {.inputs = {{{2, 3}}, {{2, 0}}}, .args = "axis=-1"},  // an empty part
                 {.inputs = {{{1, 2}}, {{3, 2}}}}},
});
OpDef& stack_op = define_op({
    .name = "stack",
    .kind = OpKind::Composite,
    .signature = "stack(tensors: list[Tensor], axis: int = 0) -> Tensor",
    .invoke = [](const CallArgs& a) { return one(stack(a.tensors(0), a.integer(1))); },
    .examples = {{.inputs = {{{2, 3}}, {{2, 3}}}, .args = "axis=-1"}},
});
OpDef& flip_op = define_op({
    .name = "flip",
    .attrs = &attrs_of<AxisAttrs>,
    .infer = infer_flip,
    .backward = bw_flip,
    .cpu = {flip_kernel},
    .signature = "flip(x: Tensor, axis: int) -> Tensor",
    .invoke = [](const CallArgs& a) { return one(flip(a.tensor(0), a.integer(1))); },
    .examples = {{.inputs = {{{2, 5}}}, .args = "axis=1"}},
});
OpDef& slice_grad_row = define_op({
    .name = "slice_grad",
    .attrs = &attrs_of<SliceAttrs>,
    .infer = infer_slice_grad,
    .backward = bw_slice_grad,
    .cpu = {slice_grad_kernel},
    .examples =
        {{.inputs = {{{3, 3}}},
          .call =
              [](std::span<const Tensor> x) {
                return one(call(slice_grad_op(), {x[0]}, SliceAttrs{1, 1, 6, 2, Shape{3, 7}}));
              }}},
});
const OpDef& slice_grad_op() { return slice_grad_row; }

// ---- in place ---------------------------------------------------------------------------
// Examples of in-place ops write a copy, so gradcheck can probe the original.
OpDef& copy_inplace_op = define_op({
    .name = "copy_",
    .kind = OpKind::InPlace,
    .min_inputs = 2,
    .max_inputs = 2,
    .mutates = 1,
    .infer = infer_inplace_binary,
    .cpu = {copy_inplace_kernel},
    .examples = {{.inputs = {{{3, 4}}, {{4}}},
                  .call =
                      [](std::span<const Tensor> x) {
                        return one(x[0].detach().clone().copy_(x[1]));
                      }}},
});
OpDef& add_inplace_op = define_op({
    .name = "add_",
    .kind = OpKind::InPlace,
    .min_inputs = 2,
    .max_inputs = 2,
    .mutates = 1,
    .infer = infer_inplace_binary,
    .cpu = {add_inplace_kernel},
    .examples =
        {{.inputs = {{{3, 4}}, {{4}}},
          .call = [](std::span<const Tensor> x) { return one(x[0].detach().clone().add_(x[1])); }}},
});
OpDef& fill_op = define_op({
    .name = "fill_",
    .kind = OpKind::InPlace,
    .mutates = 1,
    .attrs = &attrs_of<ScalarAttrs>,
    .infer = infer_fill,
    .cpu = {fill_kernel},
    .examples = {{.inputs = {{{3, 4}}},
                  .call =
                      [](std::span<const Tensor> x) {
                        return one(x[0].detach().clone().transpose(0, 1).fill_(2.5));
                      }}},
});
OpDef& add_scalar_inplace_op = define_op({
    .name = "add_scalar_",
    .kind = OpKind::InPlace,
    .mutates = 1,
    .attrs = &attrs_of<ScalarAttrs>,
    .infer = infer_inplace_scalar,
    .cpu = {add_scalar_inplace_kernel},
    .examples =
        {{.inputs = {{{3, 4}}},
          .call = [](std::span<const Tensor> x) { return one(x[0].detach().clone().add_(1.5)); }}},
});

}  // namespace

const OpDef& copy_op_def() { return copy_op; }
const OpDef& copy_inplace_op_def() { return copy_inplace_op; }

Tensor Tensor::reshape(const Shape& requested) const {
  Shape shape = requested;
  int infer = -1;
  for (int i = 0; i < shape.size(); ++i) {
    ENCORE_CHECK(shape[i] >= -1, ShapeError, "[reshape] invalid dimension in ", requested.str());
    if (shape[i] != -1) continue;
    ENCORE_CHECK(infer < 0, ShapeError, "[reshape] only one dimension may be -1 in ",
                 requested.str());
    infer = i;
    shape[i] = 1;  // for the element count of the known dims
  }
  const int64_t known = checked_numel(shape, "reshape");
  if (infer >= 0) {
    ENCORE_CHECK(known > 0 && numel() % known == 0, ShapeError, "[reshape] cannot reshape ",
                 this->shape().str(), " into ", requested.str());
    shape[infer] = numel() / known;
  }
  ENCORE_CHECK(infer >= 0 || known == numel(), ShapeError, "[reshape] cannot reshape ",
               this->shape().str(), " (", numel(), " elements) into ", requested.str());
  Strides st;
  if (!view_strides(this->shape(), strides(), shape, st)) return contiguous().reshape(shape);
  return call(reshape_op, {*this}, ReshapeAttrs{shape});
}

Tensor Tensor::permute(const std::vector<int64_t>& order) const {
  ENCORE_CHECK(static_cast<int>(order.size()) == dim(), ShapeError, "[permute] order has ",
               order.size(), " axes but the tensor ", shape().str(), " has ", dim());
  Dims o;
  for (int64_t a : order) o.push_back(normalize_axis(a, dim(), "permute"));
  return call(permute_op, {*this}, PermuteAttrs{o});
}

Tensor Tensor::transpose(int64_t a, int64_t b) const {
  std::vector<int64_t> order(dim());
  std::iota(order.begin(), order.end(), 0);
  std::swap(order[normalize_axis(a, dim(), "transpose")],
            order[normalize_axis(b, dim(), "transpose")]);
  return permute(order);
}

Tensor Tensor::slice(int64_t axis, int64_t start, int64_t stop, int64_t step) const {
  const int ax = normalize_axis(axis, dim(), "slice");
  ENCORE_CHECK(step > 0, ValueError, "[slice] step must be positive, got ", step);
  const int64_t n = shape()[ax];
  auto clamp = [n](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + n : i, 0, n); };
  return call(slice_op, {*this}, SliceAttrs{ax, clamp(start), clamp(stop), step, shape()});
}

Tensor Tensor::expand(const Shape& shape) const {
  return call(expand_op, {*this}, ExpandAttrs{shape});
}

Tensor Tensor::squeeze(int64_t axis) const {
  const int ax = normalize_axis(axis, dim(), "squeeze");
  ENCORE_CHECK(shape()[ax] == 1, ShapeError, "[squeeze] axis ", axis, " of ", shape().str(),
               " has size ", shape()[ax], ", not 1");
  Shape s = shape();
  s.erase(ax);
  return reshape(s);
}

Tensor Tensor::unsqueeze(int64_t axis) const {
  const int ax = normalize_axis(axis, dim() + 1, "unsqueeze");
  Shape s = shape();
  s.insert(ax, 1);
  return reshape(s);
}

Tensor Tensor::flatten(int64_t start_axis) const {
  const int ax = normalize_axis(start_axis, std::max(dim(), 1), "flatten");
  Shape s;
  for (int i = 0; i < ax; ++i) s.push_back(shape()[i]);
  // The size itself, not -1: with a leading 0 (an empty batch), -1 could be any size.
  int64_t rest = 1;
  for (int i = ax; i < dim(); ++i) rest *= shape()[i];
  s.push_back(rest);
  return reshape(s);
}

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }
Tensor Tensor::clone() const { return call(copy_op, {*this}); }

Tensor Tensor::to(Device device) const {
  if (device == this->device()) return *this;
  return call(to_device_op, {*this}, DeviceAttrs{device});
}

Tensor Tensor::to(DType dtype) const {
  if (dtype == this->dtype()) return *this;
  return call(cast_op, {*this}, CastAttrs{dtype});
}

Tensor& Tensor::copy_(const Tensor& src) {
  Tensor s = src.to(device());
  if (s.dtype() != dtype()) s = s.to(dtype());
  const Tensor in[] = {*this, s};
  dispatch(copy_inplace_op, in);
  return *this;
}

Tensor& Tensor::add_(const Tensor& other) {
  const Tensor in[] = {*this, other};
  dispatch(add_inplace_op, in);
  return *this;
}

Tensor& Tensor::add_(Scalar value) {
  const Tensor in[] = {*this};
  dispatch(add_scalar_inplace_op, in, ScalarAttrs{value});
  return *this;
}

Tensor& Tensor::fill_(Scalar value) {
  const Tensor in[] = {*this};
  dispatch(fill_op, in, ScalarAttrs{value});
  return *this;
}

Tensor concat(const std::vector<Tensor>& xs, int64_t axis) {
  ENCORE_CHECK(!xs.empty(), ValueError, "[concat] needs at least one tensor");
  ENCORE_CHECK(xs[0].defined(), ValueError, "[concat] input 0 is an undefined tensor");
  const int ax = normalize_axis(axis, xs[0].dim(), "concat");
  return dispatch(concat_op, xs, AxisAttrs{ax})[0];
}

Tensor stack(const std::vector<Tensor>& xs, int64_t axis) {
  ENCORE_CHECK(!xs.empty() && xs[0].defined(), ValueError, "[stack] needs at least one tensor");
  const int ax = normalize_axis(axis, xs[0].dim() + 1, "stack");
  std::vector<Tensor> parts;
  parts.reserve(xs.size());
  for (const Tensor& x : xs) parts.push_back(x.unsqueeze(ax));
  return dispatch(concat_op, parts, AxisAttrs{ax})[0];
}

Tensor flip(const Tensor& x, int64_t axis) {
  return call(flip_op, {x}, AxisAttrs{normalize_axis(axis, x.dim(), "flip")});
}

}  // namespace encore
