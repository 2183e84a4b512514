// CPU reductions. When the reduced axes are innermost in a contiguous input, each output
// accumulates in double (float32 sums of long rows keep their precision); otherwise the
// input is swept once in memory order, accumulating into the output.
#include <limits>

#include "ops/cpu/kernels.h"
#include "ops/cpu/loops.h"
#include "ops/functors.h"

namespace encore::cpu {
namespace {

template <class T> using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;

struct SumOp {
  template <class T> static T init() { return T(0); }
  // Integer sums wrap (in the int64 accumulator, then in the output type), as in NumPy.
  template <class A, class T> static A apply(A acc, T x) { return fn::wrap_add(acc, A(x)); }
};
// max starts from -inf (the max of all -inf is -inf) and propagates NaN, as the CUDA kernels do.
struct MaxOp {
  template <class T> static T init() {
    using L = std::numeric_limits<T>;
    return L::has_infinity ? -L::infinity() : L::lowest();
  }
  template <class A, class T> static A apply(A acc, T x) { return acc < A(x) || x != x ? A(x) : acc; }
};

template <class Op, class T> void reduce(const TensorRef& x, const TensorRef& y, uint32_t axes) {
  const T* in = x.ptr<const T>();
  T* out = y.ptr<T>();
  // Reduced axes form a suffix (ignoring size-1 axes) of a contiguous input?
  bool suffix = x.contiguous();
  int64_t inner = 1;
  bool seen_kept = false;
  for (int d = x.shape.size() - 1; d >= 0 && suffix; --d) {
    if (x.shape[d] == 1) continue;
    if (axes >> d & 1u) {
      if (seen_kept) suffix = false;
      inner *= x.shape[d];
    } else {
      seen_kept = true;
    }
  }
  const int64_t n_out = y.numel();
  if (suffix) {
    for (int64_t o = 0; o < n_out; ++o) {
      Acc<T> acc = Op::template init<T>();
      const T* row = in + o * inner;
      for (int64_t i = 0; i < inner; ++i) acc = Op::apply(acc, row[i]);
      out[o] = static_cast<T>(acc);
    }
    return;
  }
  for (int64_t o = 0; o < n_out; ++o) out[o] = Op::template init<T>();
  // Reduced axes form a prefix of a contiguous input (bias gradients): sweep rows, each a
  // vectorizable update of the whole output. Same order as the general path below.
  bool prefix = x.contiguous();
  bool seen_kept_front = false;
  for (int d = 0; d < x.shape.size() && prefix; ++d) {
    if (x.shape[d] == 1) continue;
    if (axes >> d & 1u) prefix = !seen_kept_front;
    else seen_kept_front = true;
  }
  if (prefix && n_out > 0) {
    const int64_t rows = x.numel() / n_out;
    for (int64_t r = 0; r < rows; ++r) {
      const T* __restrict row = in + r * n_out;
      T* __restrict o = out;
      for (int64_t j = 0; j < n_out; ++j) o[j] = static_cast<T>(Op::apply(o[j], row[j]));
    }
    return;
  }
  Strides out_st = Dims::filled(x.shape.size(), 0);
  // Output strides over the input shape: 0 on reduced axes, row-major over kept axes.
  int64_t st = 1;
  for (int d = x.shape.size() - 1; d >= 0; --d) {
    if (axes >> d & 1u) continue;
    out_st[d] = st;
    st *= x.shape[d];
  }
  StridedLoop<2>(x.shape, {out_st, x.strides}).run([&](auto off, auto s, int64_t m) {
    T* __restrict o = out + off[0];
    const T* __restrict a = in + off[1];
    if (s[0] == 1 && s[1] == 1) {
      for (int64_t i = 0; i < m; ++i) o[i] = static_cast<T>(Op::apply(o[i], a[i]));
    } else {
      for (int64_t i = 0; i < m; ++i) o[i * s[0]] = static_cast<T>(Op::apply(o[i * s[0]], a[i * s[1]]));
    }
  });
}

template <class Op> void reduce_kernel(const KernelCtx& c) {
  const uint32_t axes = std::get<ReduceAttrs>(c.attrs).axes;
  visit_dtype(c.in[0].dtype, [&]<class T>() { reduce<Op, T>(c.in[0], c.out[0], axes); });
}

}  // namespace

void register_reduce() {
  set_kernel(OpId::sum, reduce_kernel<SumOp>);
  set_kernel(OpId::max, reduce_kernel<MaxOp>);
}

}  // namespace encore::cpu
