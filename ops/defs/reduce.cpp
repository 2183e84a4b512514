// Reductions over a set of axes (a bitmask), with keepdim: rows, shape inference, backward
// formulas, CPU kernels and public functions. In a contiguous input whose reduced axes form
// one block, the CPU reduces rows (the block innermost: in double, so that float32 sums of
// long rows keep their precision, a sum in 16 partial sums) or columns (kept axes after the
// block: narrow ones in registers); otherwise it sweeps the input once in memory order,
// accumulating into the output.
#include <limits>

#include "ops/cpu/loops.h"
#include "ops/defs/common.h"
#include "ops/functors.h"
#include "ops/reduce.h"

namespace encore {
namespace {

using cpu::StridedLoop;

Shape reduced_shape(const Shape& s, uint32_t axes, bool keepdim) {
  Shape out;
  for (int i = 0; i < s.size(); ++i) {
    if (!(axes >> i & 1u))
      out.push_back(s[i]);
    else if (keepdim)
      out.push_back(1);
  }
  return out;
}

int infer_reduce(const OpDef& op, std::span<const Tensor> in, const Attrs& a, TensorMeta* out) {
  const auto& r = a.as<ReduceAttrs>();
  ENCORE_CHECK(r.axes >> in[0].dim() == 0, ShapeError, "[", op.name,
               "] reduction axes out of range for ", describe(in[0]));
  out[0] =
      defs::meta(reduced_shape(in[0].shape(), r.axes, r.keepdim), in[0].dtype(), in[0].device());
  return 1;
}

int infer_max(const OpDef& op, std::span<const Tensor> in, const Attrs& a, TensorMeta* out) {
  const auto& r = a.as<ReduceAttrs>();
  for (int i = 0; i < in[0].dim(); ++i)
    ENCORE_CHECK(!(r.axes >> i & 1u) || in[0].shape()[i] > 0, ShapeError,
                 "[max] cannot reduce the empty axis ", i, " of ", describe(in[0]));
  return infer_reduce(op, in, a, out);
}

// The gradient of a reduction has the reduced shape; bring it back to keepdim form.
Tensor keepdim_view(const Tensor& g, const Shape& in_shape, const ReduceAttrs& r) {
  return r.keepdim ? g : g.reshape(reduced_shape(in_shape, r.axes, true));
}

void bw_sum(const BackwardCtx& c, Tensor* g) {
  const auto& r = c.attrs.as<ReduceAttrs>();
  g[0] = keepdim_view(c.grads[0], c.input_shape(0), r).expand(c.input_shape(0));
}

// Ties share the gradient equally, as in TensorFlow.
void bw_max(const BackwardCtx& c, Tensor* g) {
  const auto& r = c.attrs.as<ReduceAttrs>();
  const Shape& s = c.input_shape(0);
  const Tensor mask = eq(c.inputs[0], keepdim_view(c.outputs[0], s, r));
  std::vector<int64_t> axes;
  for (int i = 0; i < s.size(); ++i)
    if (r.axes >> i & 1u) axes.push_back(i);
  g[0] = mask * (keepdim_view(c.grads[0], s, r) / sum(mask, axes, true));
}

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
  template <class A, class T> static A apply(A acc, T x) {
    return acc < A(x) || x != x ? A(x) : acc;
  }
};

// One contiguous row. A floating sum of 64 or more keeps 16 partial sums, element i in sum
// i % 16, added pairwise at the end: with one accumulator each add waited for the previous one
// (4096 floats took 1.9 us); the partial sums overlap and vectorize. Shorter rows keep one
// accumulator: setting up and folding the partial sums cost more than they saved (rows of 16:
// 3.9 ms against 1.8 for 4M floats), and the adds of consecutive rows overlap anyway. max keeps
// the order of the elements, which decides between -0 and +0.
template <class Op, class T> Acc<T> reduce_row(const T* row, int64_t n) {
  constexpr int kPartial = 16;
  if constexpr (std::is_same_v<Op, SumOp> && std::is_floating_point_v<T>) {
    if (n < 4 * kPartial) {
      Acc<T> acc = 0;
      for (int64_t i = 0; i < n; ++i) acc += static_cast<Acc<T>>(row[i]);
      return acc;
    }
    Acc<T> part[kPartial] = {};
    int64_t i = 0;
    for (; i + kPartial <= n; i += kPartial)
      for (int j = 0; j < kPartial; ++j) part[j] += static_cast<Acc<T>>(row[i + j]);
    for (int j = 0; i < n; ++i, ++j) part[j] += static_cast<Acc<T>>(row[i]);
    for (int width = kPartial / 2; width > 0; width /= 2)
      for (int j = 0; j < width; ++j) part[j] += part[j + width];
    return part[0];
  } else {
    Acc<T> acc = Op::template init<T>();
    for (int64_t i = 0; i < n; ++i) acc = Op::apply(acc, row[i]);
    return acc;
  }
}

// `rows` rows of `cols` contiguous values reduced into `cols` outputs, each in row order (the
// order of the general sweep below). Rows of up to 256 bytes go in blocks of 64 bytes of
// columns kept in registers over all rows and stored once: updating the outputs in memory row
// after row cost a load and a store per element (sum over 1120 rows of 64 floats: 6.2 us a
// call before, 3.4 now). Wider rows are swept in memory order: there, a block's chain of
// dependent adds down its column is what takes the time (4480 rows of 128: 56 us swept, 83 in
// blocks).
template <class Op, class T> void reduce_columns(const T* in, T* out, int64_t rows, int64_t cols) {
  constexpr int64_t kBlock = 64 / sizeof(T);
  int64_t j0 = 0;
  if (cols * static_cast<int64_t>(sizeof(T)) <= 256) {
    for (; j0 + kBlock <= cols; j0 += kBlock) {
      T acc[kBlock];
      for (int64_t j = 0; j < kBlock; ++j) acc[j] = Op::template init<T>();
      for (int64_t r = 0; r < rows; ++r) {
        const T* row = in + r * cols + j0;
        for (int64_t j = 0; j < kBlock; ++j) acc[j] = static_cast<T>(Op::apply(acc[j], row[j]));
      }
      for (int64_t j = 0; j < kBlock; ++j) out[j0 + j] = acc[j];
    }
  }
  T* __restrict o = out + j0;
  const int64_t rest = cols - j0;
  for (int64_t j = 0; j < rest; ++j) o[j] = Op::template init<T>();
  for (int64_t r = 0; r < rows; ++r) {
    const T* __restrict row = in + r * cols + j0;
    for (int64_t j = 0; j < rest; ++j) o[j] = static_cast<T>(Op::apply(o[j], row[j]));
  }
}

template <class Op, class T> void reduce(const TensorRef& x, const TensorRef& y, uint32_t axes) {
  const T* in = x.ptr<const T>();
  T* out = y.ptr<T>();
  // A contiguous input whose reduced axes (size-1 axes aside) form one block is (outer,
  // reduced, inner): a row per output when inner is 1 (a loss, a norm), else rows of columns
  // (a bias gradient, global average pooling).
  if (x.contiguous()) {
    int64_t outer = 1, reduced = 1, inner = 1;
    int part = 0;  // 0: kept axes before the block, 1: the block, 2: kept axes after it
    bool block = true;
    for (int d = 0; d < x.shape.size(); ++d) {
      if (x.shape[d] == 1) continue;
      if (axes >> d & 1u) {
        block = block && part < 2;
        part = 1;
        reduced *= x.shape[d];
      } else {
        if (part == 1) part = 2;
        (part == 2 ? inner : outer) *= x.shape[d];
      }
    }
    if (block) {
      for (int64_t o = 0; o < outer; ++o) {
        const T* slab = in + o * reduced * inner;
        if (inner == 1)
          out[o] = static_cast<T>(reduce_row<Op>(slab, reduced));
        else
          reduce_columns<Op>(slab, out + o * inner, reduced, inner);
      }
      return;
    }
  }
  const int64_t n_out = y.numel();
  for (int64_t o = 0; o < n_out; ++o) out[o] = Op::template init<T>();
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
      for (int64_t i = 0; i < m; ++i)
        o[i * s[0]] = static_cast<T>(Op::apply(o[i * s[0]], a[i * s[1]]));
    }
  });
}

template <class Op> void reduce_kernel(const KernelCtx& c) {
  const uint32_t axes = c.attrs.as<ReduceAttrs>().axes;
  visit_dtype(c.in[0].dtype, [&]<class T>() { reduce<Op, T>(c.in[0], c.out[0], axes); });
}

// The public axis argument: None (all axes), an int or a sequence. The C++ functions read an
// empty list as "all"; a caller who writes axis=() means "none", which reduces nothing.
std::vector<int64_t> axes_arg(const CallArgs& a, int i) {
  if (a.is_none(i)) return {};
  std::vector<int64_t> axes = a.integers(i);
  ENCORE_CHECK(!axes.empty(), ValueError, "[", a.signature().name,
               "] an empty axis list reduces nothing; use axis=None for all");
  return axes;
}

OpDef& sum_op = define_op({
    .name = "sum",
    .attrs = &attrs_of<ReduceAttrs>,
    .infer = infer_reduce,
    .backward = bw_sum,
    .cpu = {reduce_kernel<SumOp>},
    .signature =
        "sum(x: Tensor, axis: tuple[int, ...] | None = None, keepdims: bool = False) -> Tensor",
    .invoke = [](const CallArgs& a) -> Outputs {
      return {sum(a.tensor(0), axes_arg(a, 1), a.boolean(2))};
    },
    .method = true,
    .examples = {{.inputs = {{{2, 3, 4}}}, .args = "axis=(0, 2), keepdims=True"},
                 {.inputs = {{{2, 3, 4}}}},                    // every axis: a 0-d result
                 {.inputs = {{{2, 0, 3}}}, .args = "axis=1"},  // a sum over nothing
                 {.inputs = {{{3, 2}}}, .args = "axis=(-1, 0), keepdims=True"}},
});
OpDef& max_op = define_op({
    .name = "max",
    .save = Save::Inputs | Save::Outputs,
    .attrs = &attrs_of<ReduceAttrs>,
    .infer = infer_max,
    .backward = bw_max,
    .cpu = {reduce_kernel<MaxOp>},
    .signature =
        "max(x: Tensor, axis: tuple[int, ...] | None = None, keepdims: bool = False) -> Tensor",
    .invoke = [](const CallArgs& a) -> Outputs {
      return {max(a.tensor(0), axes_arg(a, 1), a.boolean(2))};
    },
    .method = true,
    .examples = {{.inputs = {{{2, 3, 4}, ExampleInput::Distinct}}, .args = "axis=1"},
                 {.inputs = {{{2, 3, 4}, ExampleInput::Distinct}}},
                 {.inputs = {{{3, 1, 2}, ExampleInput::Distinct}},
                  .args = "axis=(0, 1), keepdims=True"}},
});
OpDef& mean_op = define_op({
    .name = "mean",
    .kind = OpKind::Composite,
    .signature =
        "mean(x: Tensor, axis: tuple[int, ...] | None = None, keepdims: bool = False) -> Tensor",
    .invoke = [](const CallArgs& a) -> Outputs {
      return {mean(a.tensor(0), axes_arg(a, 1), a.boolean(2))};
    },
    .method = true,
    .examples = {{.inputs = {{{2, 3, 4}}}, .args = "axis=-1"},
                 {.inputs = {{{2, 3, 4}}}, .args = "keepdims=True"},
                 {.inputs = {{{1, 5}}}, .args = "axis=0"}},
});
OpDef& sum_to_op = define_op({
    .name = "sum_to",
    .kind = OpKind::Composite,
    .signature = "sum_to(x: Tensor, shape: tuple[int, ...]) -> Tensor",
    .invoke = [](const CallArgs& a) -> Outputs {
      return {sum_to(a.tensor(0), Shape(a.integers(1)))};
    },
    .examples = {{.inputs = {{{2, 3, 4}}}, .args = "shape=(3, 1)"},
                 {.inputs = {{{2, 3}}}, .args = "shape=()"}},
});

uint32_t axes_mask(const Tensor& x, const std::vector<int64_t>& axes, const char* op) {
  if (axes.empty()) return x.dim() == 0 ? 0u : (1u << x.dim()) - 1u;
  uint32_t mask = 0;
  for (int64_t a : axes) {
    const int ax = normalize_axis(a, x.dim(), op);
    ENCORE_CHECK(!(mask >> ax & 1u), ValueError, "[", op, "] axis ", a, " is listed twice");
    mask |= 1u << ax;
  }
  return mask;
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int64_t>& axes, bool keepdim) {
  return call(sum_op, {x}, ReduceAttrs{axes_mask(x, axes, "sum"), keepdim});
}

Tensor mean(const Tensor& x, const std::vector<int64_t>& axes, bool keepdim) {
  const uint32_t mask = axes_mask(x, axes, "mean");
  int64_t count = 1;
  for (int i = 0; i < x.dim(); ++i)
    if (mask >> i & 1u) count *= x.shape()[i];
  ENCORE_CHECK(is_floating(x.dtype()), DTypeError, "[mean] needs a floating tensor, got ",
               describe(x));
  return mul(call(sum_op, {x}, ReduceAttrs{mask, keepdim}), 1.0 / static_cast<double>(count));
}

Tensor max(const Tensor& x, const std::vector<int64_t>& axes, bool keepdim) {
  return call(max_op, {x}, ReduceAttrs{axes_mask(x, axes, "max"), keepdim});
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  const int lead = x.dim() - shape.size();
  ENCORE_CHECK(lead >= 0, ShapeError, "[sum_to] cannot sum ", x.shape().str(), " to ", shape.str());
  std::vector<int64_t> axes;
  for (int i = 0; i < x.dim(); ++i) {
    if (i < lead) {
      axes.push_back(i);
      continue;
    }
    const int64_t want = shape[i - lead];
    ENCORE_CHECK(want == x.shape()[i] || want == 1, ShapeError, "[sum_to] cannot sum ",
                 x.shape().str(), " to ", shape.str());
    if (want == 1 && x.shape()[i] != 1) axes.push_back(i);
  }
  Tensor r = axes.empty() ? x : sum(x, axes, true);
  return r.reshape(shape);
}

}  // namespace encore
