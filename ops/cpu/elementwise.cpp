// CPU kernels for the elementwise tables: contiguous fast paths, else strided loops.
#include "ops/cpu/loops.h"
#include "ops/elementwise.h"
#include "ops/cpu/kernels.h"

namespace encore::cpu {
namespace {

template <class F, class T> void unary(const TensorRef& x, const TensorRef& y, F f) {
  T* out = y.ptr<T>();
  const T* in = x.ptr<const T>();
  if (x.contiguous()) {
    const int64_t n = y.numel();
    for (int64_t i = 0; i < n; ++i) out[i] = f(in[i]);
    return;
  }
  StridedLoop<2>(y.shape, {y.strides, x.strides}).run([&](auto off, auto st, int64_t n) {
    T* __restrict o = out + off[0];
    const T* __restrict a = in + off[1];
    if (st[0] == 1 && st[1] == 1) {
      for (int64_t i = 0; i < n; ++i) o[i] = f(a[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) o[i * st[0]] = f(a[i * st[1]]);
    }
  });
}

// True when `b` (ignoring leading 1s) equals the trailing dims of `shape`.
inline bool trailing_match(const Shape& b, const Shape& shape) {
  int lead = 0;
  while (lead < b.size() && b[lead] == 1) ++lead;
  const int k = b.size() - lead;
  if (k > shape.size()) return false;
  for (int i = 0; i < k; ++i)
    if (b[lead + i] != shape[shape.size() - k + i]) return false;
  return true;
}

template <class F, class T>
void binary(const TensorRef& a, const TensorRef& b, const TensorRef& y, F f) {
  T* out = y.ptr<T>();
  const T* pa = a.ptr<const T>();
  const T* pb = b.ptr<const T>();
  const int64_t n = y.numel();
  if (a.contiguous() && b.contiguous()) {
    if (a.numel() == n && b.numel() == n) {
      for (int64_t i = 0; i < n; ++i) out[i] = f(pa[i], pb[i]);
      return;
    }
    if (b.numel() == 1 && a.numel() == n) {
      const T s = pb[0];
      for (int64_t i = 0; i < n; ++i) out[i] = f(pa[i], s);
      return;
    }
    if (a.numel() == 1 && b.numel() == n) {
      const T s = pa[0];
      for (int64_t i = 0; i < n; ++i) out[i] = f(s, pb[i]);
      return;
    }
    // A row vector broadcast over leading dims (a bias): b's shape is a's trailing shape.
    const int64_t m = b.numel();
    if (a.numel() == n && m > 0 && n % m == 0 && trailing_match(b.shape, y.shape)) {
      for (int64_t r = 0; r < n; r += m) {
        T* __restrict o = out + r;
        const T* __restrict x = pa + r;
        for (int64_t i = 0; i < m; ++i) o[i] = f(x[i], pb[i]);
      }
      return;
    }
  }
  StridedLoop<3>(y.shape, {y.strides, broadcast_strides(a, y.shape), broadcast_strides(b, y.shape)})
      .run([&](auto off, auto st, int64_t m) {
        // Unit-stride and broadcast inner runs get loops the compiler can vectorize.
        T* __restrict o = out + off[0];
        const T* __restrict x0 = pa + off[1];
        const T* __restrict x1 = pb + off[2];
        if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
          for (int64_t i = 0; i < m; ++i) o[i] = f(x0[i], x1[i]);
        } else if (st[0] == 1 && st[1] == 1 && st[2] == 0) {
          const T s = *x1;
          for (int64_t i = 0; i < m; ++i) o[i] = f(x0[i], s);
        } else if (st[0] == 1 && st[1] == 0 && st[2] == 1) {
          const T s = *x0;
          for (int64_t i = 0; i < m; ++i) o[i] = f(s, x1[i]);
        } else {
          for (int64_t i = 0; i < m; ++i) o[i * st[0]] = f(x0[i * st[1]], x1[i * st[2]]);
        }
      });
}

template <class F, DTypeClass C> void unary_kernel(const KernelCtx& c) {
  const F f = make_functor<F>(c.attrs);
  if constexpr (C == DTypeClass::Float)
    visit_float(c.in[0].dtype, [&]<class T>() { unary<F, T>(c.in[0], c.out[0], f); });
  else
    visit_dtype(c.in[0].dtype, [&]<class T>() { unary<F, T>(c.in[0], c.out[0], f); });
}

template <class F, DTypeClass C> void binary_kernel(const KernelCtx& c) {
  const F f{};
  visit_dtype(c.in[0].dtype, [&]<class T>() { binary<F, T>(c.in[0], c.in[1], c.out[0], f); });
}

}  // namespace

void register_elementwise() {
#define ENCORE_REGISTER_UNARY(op, F, cls) \
  set_kernel(OpId::op, unary_kernel<fn::F, DTypeClass::cls>);
  ENCORE_UNARY_OPS(ENCORE_REGISTER_UNARY)
#undef ENCORE_REGISTER_UNARY
#define ENCORE_REGISTER_BINARY(op, F, cls) \
  set_kernel(OpId::op, binary_kernel<fn::F, DTypeClass::cls>);
  ENCORE_BINARY_OPS(ENCORE_REGISTER_BINARY)
#undef ENCORE_REGISTER_BINARY
}

}  // namespace encore::cpu
