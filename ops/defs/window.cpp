// Sliding windows along one axis: padding specs and window counts (ops/window.h), pad (a
// composition), and unfold, the windowed view that pools and other window layers are composed
// from, with the one kernel it needs: the gradient of overlapping windows, summed back.
#include <algorithm>
#include <limits>
#include <tuple>

#include "ops/defs/common.h"
#include "ops/strided.h"
#include "ops/window.h"

namespace encore {

namespace {

const OpDef& unfold_backward_op();

// x (..., L, ...) -> (..., windows, ..., size): the view's window index replaces `axis`, the
// position in the window is a new last axis.
int infer_unfold(const OpDef&, std::span<const Tensor> in, const Attrs& attrs, TensorMeta* out) {
  const auto& a = attrs.as<UnfoldAttrs>();
  const Tensor& x = in[0];
  ENCORE_CHECK(x.dim() < kMaxDims, ShapeError, "[unfold] ", describe(x),
               " has too many axes for one more");
  const int64_t windows = window_out_length("unfold", x.shape()[a.axis], a.size, a.step, 1, 0, 0);
  out[0] = {x.shape(), x.strides(), x.offset(), x.dtype(), x.device()};
  out[0].shape[a.axis] = windows;
  if (windows > 1) out[0].strides[a.axis] *= a.step;
  out[0].shape.push_back(a.size);
  out[0].strides.push_back(x.strides()[a.axis]);
  return 1;
}
void bw_unfold(const BackwardCtx& c, Tensor* g) {
  UnfoldAttrs a = c.attrs.as<UnfoldAttrs>();
  a.length = c.input_shape(0)[a.axis];
  g[0] = call(unfold_backward_op(), {c.grads[0]}, a);
}

// The gradient of the windows (..., windows, ..., size) -> (..., length, ...).
int infer_unfold_backward(const OpDef&, std::span<const Tensor> in, const Attrs& attrs,
                          TensorMeta* out) {
  const auto& a = attrs.as<UnfoldAttrs>();
  Shape shape = in[0].shape();
  ENCORE_CHECK(
      shape.size() >= 2 && a.axis < shape.size() - 1 && shape.back() == a.size &&
          window_out_length("unfold_backward", a.length, a.size, a.step, 1, 0, 0) == shape[a.axis],
      ShapeError, "[unfold_backward] ", describe(in[0]), " are not the windows of ", a.str());
  shape.resize(shape.size() - 1);
  shape[a.axis] = a.length;
  out[0] = defs::meta(shape, in[0].dtype(), in[0].device());
  return 1;
}
void bw_unfold_backward(const BackwardCtx& c, Tensor* g) {
  const auto& a = c.attrs.as<UnfoldAttrs>();
  g[0] = unfold(c.grads[0], a.axis, a.size, a.step);
}

// out[o, i, j] = sum over k of g[o, window_of(i, k), j, k], k ascending (as on the GPU).
template <class T> void unfold_backward_cpu(const KernelCtx& c) {
  const auto& a = c.attrs.as<UnfoldAttrs>();
  const TensorRef &g = c.in[0], &out = c.out[0];
  const WindowGeometry w{g.shape[a.axis], a.size, a.step};
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < a.axis; ++d) outer *= out.shape[d];
  for (int d = a.axis + 1; d < out.shape.size(); ++d) inner *= out.shape[d];
  const T* gp = g.ptr<const T>();
  T* op = out.ptr<T>();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < a.length; ++i)
      for (int64_t j = 0; j < inner; ++j) {
        T sum = 0;
        for (int64_t k = 0; k < a.size; ++k) {
          const int64_t win = w.window_of(i, k);
          if (win >= 0) sum += gp[((o * w.windows + win) * inner + j) * a.size + k];
        }
        op[(o * a.length + i) * inner + j] = sum;
      }
}

OpDef& unfold_op = define_op({
    .name = "unfold",
    .kind = OpKind::View,
    .attrs = &attrs_of<UnfoldAttrs>,
    .infer = infer_unfold,
    .backward = bw_unfold,
    .signature = "unfold(x: Tensor, axis: int, size: int, step: int = 1) -> Tensor",
    .invoke = [](const CallArgs& a) -> Outputs {
      return {unfold(a.tensor(0), a.integer(1), a.integer(2), a.integer(3))};
    },
    .method = true,
    .doc = "The windows of `size` entries, `step` apart, along `axis`, as a view: `axis` becomes "
           "the window "
           "index and a new last axis the position in the window (windows may overlap)",
    .examples = {{.inputs = {{{2, 7, 3}}}, .args = "axis=1, size=3, step=2"},
                 {.inputs = {{{2, 4, 3}}}, .args = "axis=1, size=4, step=3"}},  // one window
});
OpDef& unfold_backward_row = define_op({
    .name = "unfold_backward",
    .contiguous_inputs = true,
    .attrs = &attrs_of<UnfoldAttrs>,
    .infer = infer_unfold_backward,
    .backward = bw_unfold_backward,
    .cpu = {[](const KernelCtx& c) {
      visit_float(c.in[0].dtype, [&]<class T>() { unfold_backward_cpu<T>(c); });
    }},
    .examples = {{.inputs = {{{2, 4, 3, 2}}},
                  .call = [](std::span<const Tensor> x) -> Outputs {
                    return {call(unfold_backward_op(), {x[0]}, UnfoldAttrs{1, 2, 1, 5})};
                  }}},
});
OpDef& pad_op = define_op({
    .name = "pad",
    .kind = OpKind::Composite,
    .signature = "pad(x: Tensor, axis: int, before: int, after: int, value: float = 0.0) -> Tensor",
    .invoke = [](const CallArgs& a) -> Outputs {
      return {pad(a.tensor(0), a.integer(1), a.integer(2), a.integer(3), a.scalar(4))};
    },
    .method = true,
    .doc = "x with `before` and `after` entries of `value` added along `axis`",
    .examples = {{.inputs = {{{2, 4, 3}}}, .args = "axis=1, before=2, after=1, value=0.5"},
                 {.inputs = {{{2, 0, 3}}}, .args = "axis=1, before=0, after=2"}},
});

constexpr auto Distinct = ExampleInput::Distinct;

OpDef& max_pool1d_op = define_op({
    .name = "max_pool1d",
    .kind = OpKind::Composite,
    .signature = "max_pool1d(x: Tensor, pool_size: int = 2, strides: int | None = None, padding: "
                 "str = 'valid') -> Tensor",
    .invoke = [](const CallArgs& a) -> Outputs {
      return {max_pool1d(a.tensor(0), a.integer(1), a.optional_integer(2),
                         Padding::parse(a.string(3), "max_pool1d"))};
    },
    .doc = "Keras MaxPooling1D on (batch, steps, channels); ties in a window share its gradient "
           "equally",
    .examples =
        {
            {.inputs = {{{2, 8, 3}, Distinct}}, .args = "pool_size=3, strides=2, padding='same'"},
            {.inputs = {{{2, 7, 3}, Distinct}}},  // 'valid', strides = pool_size: a step left over
            {.inputs = {{{1, 2, 3}, Distinct}},
             .args = "pool_size=3, padding='same'"},  // window > input
            {.inputs = {{{2, 9, 2}, Distinct}},
             .args = "pool_size=2, strides=3, padding='same'"},  // gaps
        },
});

OpDef& avg_pool1d_op = define_op({
    .name = "avg_pool1d",
    .kind = OpKind::Composite,
    .signature = "avg_pool1d(x: Tensor, pool_size: int = 2, strides: int | None = None, padding: "
                 "str = 'valid') -> Tensor",
    .invoke = [](const CallArgs& a) -> Outputs {
      return {avg_pool1d(a.tensor(0), a.integer(1), a.optional_integer(2),
                         Padding::parse(a.string(3), "avg_pool1d"))};
    },
    .doc = "Keras AveragePooling1D on (batch, steps, channels); with 'same' padding a window "
           "averages its real "
           "steps only",
    .examples =
        {
            {.inputs = {{{2, 8, 3}}}, .args = "pool_size=3, strides=2, padding='same'"},
            {.inputs = {{{2, 5, 3}}},
             .args = "pool_size=4, strides=1, padding='same'"},  // 2-4 real steps
            {.inputs = {{{1, 5, 2}}}, .args = "pool_size=5"},    // one window, the whole input
            {.inputs = {{{0, 4, 2}}}, .args = "pool_size=2, padding='same'"},
        },
});

const OpDef& unfold_backward_op() { return unfold_backward_row; }

// The lowest value of a dtype: what padding for a max adds.
Scalar lowest(DType d) {
  switch (d) {
    case DType::Int32:
      return int64_t{std::numeric_limits<int32_t>::min()};
    case DType::Int64:
      return std::numeric_limits<int64_t>::min();
    default:
      return -std::numeric_limits<double>::infinity();
  }
}

// x's shape with `before` and `after` steps added along `axis`, checked for `op` (which the
// pads inside pooling would otherwise report as their own fill's error).
Shape padded_shape(const char* op, const Tensor& x, int axis, int64_t before, int64_t after) {
  Shape s = x.shape();
  bool fits = !__builtin_add_overflow(s[axis], before, &s[axis]) &&
              !__builtin_add_overflow(s[axis], after, &s[axis]);
  for (int64_t i = 0, n = 1; fits && i < s.size(); ++i)
    fits = s[i] == 0 || (!__builtin_mul_overflow(n, s[i], &n) && n <= kMaxNumel);
  ENCORE_CHECK(fits, ShapeError, "[", op, "] padding ", x.shape().str(), " by (", before, ", ",
               after, ") along axis ", axis, " gives too many elements (at most 2^60 - 1)");
  return s;
}

// A pool's (stride, left, right padding), checked: x is (batch, steps, channels), the padding
// 'valid' or 'same', and at least one window fits.
std::tuple<int64_t, int64_t, int64_t> pool_geometry(const char* op, const Tensor& x,
                                                    int64_t pool_size,
                                                    std::optional<int64_t> strides,
                                                    Padding padding) {
  ENCORE_CHECK(x.defined() && x.dim() == 3, ShapeError, "[", op,
               "] expects (batch, steps, channels), got ",
               x.defined() ? describe(x) : std::string("an undefined tensor"));
  ENCORE_CHECK(padding.kind == Padding::Valid || padding.kind == Padding::Same, ValueError, "[", op,
               "] padding must be 'valid' or 'same'");
  const int64_t stride = strides.value_or(pool_size);
  const auto [l, r] = window_padding(op, x.shape()[1], pool_size, stride, 1, padding);
  window_out_length(op, x.shape()[1], pool_size, stride, 1, l, r);
  padded_shape(op, x, 1, l, r);
  return {stride, l, r};
}

}  // namespace

Padding Padding::parse(const std::string& s, const char* op) {
  if (s == "valid") return valid();
  if (s == "same") return same();
  if (s == "causal") return causal();
  throw ValueError(
      detail::cat("[", op, "] unknown padding '", s, "' (expected 'valid', 'same' or 'causal')"));
}

int64_t window_span(const char* op, int64_t window, int64_t dilation) {
  int64_t span;
  ENCORE_CHECK(!__builtin_mul_overflow(window - 1, dilation, &span) &&
                   !__builtin_add_overflow(span, 1, &span),
               ShapeError, "[", op, "] kernel size ", window, " with dilation ", dilation,
               " overflows int64");
  return span;
}

std::pair<int64_t, int64_t> window_padding(const char* op, int64_t length, int64_t window,
                                           int64_t stride, int64_t dilation, Padding padding) {
  switch (padding.kind) {
    case Padding::Valid:
      return {0, 0};
    case Padding::Explicit:
      return {padding.left, padding.right};
    case Padding::Causal:
      return {window_span(op, window, dilation) - 1, 0};
    case Padding::Same: {
      // Keras/TensorFlow 'same': ceil(L / stride) windows, the extra padding on the right.
      // (windows - 1) * stride < length, so only the span can overflow.
      const int64_t windows = length / stride + (length % stride != 0);
      const int64_t span = window_span(op, window, dilation);
      const int64_t total = std::max<int64_t>((windows - 1) * stride - length + span, 0);
      return {total / 2, total - total / 2};
    }
  }
  return {0, 0};
}

int64_t window_out_length(const char* op, int64_t length, int64_t window, int64_t stride,
                          int64_t dilation, int64_t pad_l, int64_t pad_r) {
  ENCORE_CHECK(
      window >= 1 && stride >= 1 && dilation >= 1 && pad_l >= 0 && pad_r >= 0, ValueError, "[", op,
      "] window size, stride and dilation must be >= 1 and padding >= 0, got size ", window,
      ", stride ", stride, ", dilation ", dilation, ", padding (", pad_l, ", ", pad_r, ")");
  const int64_t span = window_span(op, window, dilation);
  int64_t padded;
  ENCORE_CHECK(!__builtin_add_overflow(length, pad_l, &padded) &&
                   !__builtin_add_overflow(padded, pad_r, &padded),
               ShapeError, "[", op, "] input length ", length, " with padding (", pad_l, ", ",
               pad_r, ") overflows int64");
  // Not (padded - span) / stride + 1 alone: C++ division truncates toward zero, so a negative
  // numerator would count one window that does not fit.
  ENCORE_CHECK(padded >= span, ShapeError, "[", op, "] input length ", length, " with padding (",
               pad_l, ", ", pad_r, ") is too short for kernel size ", window,
               dilation > 1 ? detail::cat(" at dilation ", dilation) : "");
  return (padded - span) / stride + 1;
}

Tensor unfold(const Tensor& x, int64_t axis, int64_t size, int64_t step) {
  ENCORE_CHECK(x.defined(), ValueError, "[unfold] undefined tensor");
  ENCORE_CHECK(size >= 1 && step >= 1, ValueError, "[unfold] size and step must be >= 1, got ",
               size, " and ", step);
  return call(unfold_op, {x}, UnfoldAttrs{normalize_axis(axis, x.dim(), "unfold"), size, step, 0});
}

Tensor max_pool1d(const Tensor& x, int64_t pool_size, std::optional<int64_t> strides,
                  Padding padding) {
  const auto [stride, l, r] = pool_geometry("max_pool1d", x, pool_size, strides, padding);
  return max(unfold(pad(x, 1, l, r, lowest(x.dtype())), 1, pool_size, stride), {-1});
}

Tensor avg_pool1d(const Tensor& x, int64_t pool_size, std::optional<int64_t> strides,
                  Padding padding) {
  const auto [stride, l, r] = pool_geometry("avg_pool1d", x, pool_size, strides, padding);
  ENCORE_CHECK(is_floating(x.dtype()), DTypeError, "[avg_pool1d] expects a floating tensor, got ",
               describe(x));
  const Tensor sums = sum(unfold(pad(x, 1, l, r), 1, pool_size, stride), {-1});
  if (l == 0 && r == 0) return sums / pool_size;
  // As in Keras (TensorFlow), the padding is not averaged in: each window divides by the number
  // of real steps it covers, counted by pooling ones the same way.
  const Tensor steps = ones({1, x.shape()[1], 1}, x.dtype(), x.device());
  return sums / sum(unfold(pad(steps, 1, l, r), 1, pool_size, stride), {-1});
}

Tensor pad(const Tensor& x, int64_t axis, int64_t before, int64_t after, Scalar value) {
  ENCORE_CHECK(x.defined(), ValueError, "[pad] undefined tensor");
  ENCORE_CHECK(before >= 0 && after >= 0, ValueError, "[pad] amounts must be >= 0, got (", before,
               ", ", after, ")");
  const int ax = normalize_axis(axis, x.dim(), "pad");
  value.check(x.dtype(), "pad");
  if (before == 0 && after == 0) return x;
  padded_shape("pad", x, ax, before, after);
  std::vector<Tensor> parts;
  for (const int64_t n : {before, int64_t{-1}, after}) {
    if (n == 0) continue;
    if (n < 0) {
      parts.push_back(x);
      continue;
    }
    Shape s = x.shape();
    s[ax] = n;
    parts.push_back(full(s, value, x.dtype(), x.device()));
  }
  return concat(parts, ax);
}

}  // namespace encore
