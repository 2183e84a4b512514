// CPU kernels that move data: copies between layouts and dtypes, concat, slice_grad, and
// the simple in-place updates.
#include <cstring>

#include "ops/cpu/kernels.h"
#include "ops/cpu/loops.h"
#include "ops/functors.h"

namespace encore::cpu {
namespace {

// dst[i] = f(dst[i], src[i]) over dst's shape, src broadcast to it.
template <class TD, class TS, class F> void update(const TensorRef& dst, const TensorRef& src, F f) {
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
  visit_dtype(c.in[0].dtype, [&]<class T>() { update<T, T>(c.in[0], c.in[1], [](T d, T s) { return fn::wrap_add(d, s); }); });
}

void cast_kernel(const KernelCtx& c) {
  visit_dtype(c.in[0].dtype, [&]<class TS>() {
    visit_dtype(c.out[0].dtype, [&]<class TD>() {
      update<TD, TS>(c.out[0], c.in[0], [](TD, TS s) { return fn::cast_value<TD>(s); });
    });
  });
}

void fill_kernel(const KernelCtx& c) {
  const Scalar& v = std::get<ScalarAttrs>(c.attrs).value;
  const TensorRef& t = c.in[0];
  visit_dtype(t.dtype, [&]<class T>() {
    const T value = fn::scalar_as<T>(v);
    TensorRef scalar{const_cast<T*>(&value), {}, {}, t.dtype, t.device};
    update<T, T>(t, scalar, [](T, T s) { return s; });
  });
}

void add_scalar_inplace_kernel(const KernelCtx& c) {
  const Scalar& v = std::get<ScalarAttrs>(c.attrs).value;
  const TensorRef& t = c.in[0];
  visit_dtype(t.dtype, [&]<class T>() {
    const T value = fn::scalar_as<T>(v);
    TensorRef scalar{const_cast<T*>(&value), {}, {}, t.dtype, t.device};
    update<T, T>(t, scalar, [](T d, T s) { return fn::wrap_add(d, s); });
  });
}

// A view of `out` covering [start, start + len) along `axis` with the given step.
TensorRef sub_view(const TensorRef& out, int axis, int64_t start, const Shape& shape, int64_t step) {
  TensorRef v = out;
  v.data = static_cast<char*>(out.data) + start * out.strides[axis] * itemsize(out.dtype);
  v.shape = shape;
  if (shape[axis] > 1) v.strides[axis] *= step;  // see infer_slice
  return v;
}

void concat_kernel(const KernelCtx& c) {
  const int axis = std::get<AxisAttrs>(c.attrs).axis;
  int64_t start = 0;
  visit_dtype(c.out[0].dtype, [&]<class T>() {
    for (const TensorRef& x : c.in) {
      assign<T>(sub_view(c.out[0], axis, start, x.shape, 1), x);
      start += x.shape[axis];
    }
  });
}

void slice_grad_kernel(const KernelCtx& c) {
  const auto& s = std::get<SliceAttrs>(c.attrs);
  std::memset(c.out[0].data, 0, c.out[0].numel() * itemsize(c.out[0].dtype));
  if (c.in[0].numel() == 0) return;
  visit_dtype(c.out[0].dtype, [&]<class T>() {
    assign<T>(sub_view(c.out[0], s.axis, s.start, c.in[0].shape, s.step), c.in[0]);
  });
}

void flip_kernel(const KernelCtx& c) {
  const int axis = std::get<AxisAttrs>(c.attrs).axis;
  TensorRef src = c.in[0];
  const int64_t n = src.shape[axis];
  if (n == 0) return;
  // Read the input backwards along `axis`: start at its last entry with a negated stride.
  src.data = static_cast<char*>(src.data) + (n - 1) * src.strides[axis] * itemsize(src.dtype);
  src.strides[axis] = -src.strides[axis];
  visit_dtype(src.dtype, [&]<class T>() { update<T, T>(c.out[0], src, [](T, T s) { return s; }); });
}

}  // namespace

void register_data() {
  set_kernel(OpId::flip, flip_kernel);
  set_kernel(OpId::copy, copy_kernel);
  set_kernel(OpId::to_device, copy_kernel);  // CPU to CPU; transfers with a GPU run on CUDA
  set_kernel(OpId::cast, cast_kernel);
  set_kernel(OpId::concat, concat_kernel);
  set_kernel(OpId::slice_grad, slice_grad_kernel);
  set_kernel(OpId::copy_, copy_inplace_kernel);
  set_kernel(OpId::add_, add_inplace_kernel);
  set_kernel(OpId::fill_, fill_kernel);
  set_kernel(OpId::add_scalar_, add_scalar_inplace_kernel);
}

}  // namespace encore::cpu
