// 1-D convolution, channels-last (x (batch, steps, channels), w (kernel, in, filters), as in
// Keras): rows of the forward op and its two gradient ops, shape inference, the backward
// formula and the public function. The CPU kernels are in ops/cpu/onednn_conv.cpp (float32:
// oneDNN; float64: plain loops), the CUDA ones in ops/cuda/conv1d.cpp.
// With set_conv1d_layout(Blocked), oneDNN's blocked activations are an opt-in that wins on some
// shapes (docs/puzzles/4-layout.md): conv1d() asks oneDNN which layout it prefers for the shape
// and emits to_blocked -> the convolution on blocked operands (ConvAttrs' blocks) ->
// from_blocked, graph nodes like any other, whose gradients are the inverse conversions.
#include <algorithm>
#include <atomic>

#include "ops/conv.h"
#include "ops/cpu/onednn_conv.h"
#include "ops/defs/common.h"
#include "ops/epilogue.h"
#include "ops/layout.h"

namespace encore {
namespace {

using cpu::ConvKind;
using cpu::ConvProblem;

const OpDef& conv1d_backward_data_op();
const OpDef& conv1d_backward_filter_op();

std::atomic<Conv1dLayout> g_layout{Conv1dLayout::Native};

int64_t conv_out_length(const char* op, int64_t length, int64_t kernel, const ConvAttrs& a) {
  return window_out_length(op, length, kernel, a.stride, a.dilation, a.pad_l, a.pad_r);
}

// The padding argument: 'valid', 'same', 'causal', an int, or a (left, right) pair.
Padding padding_arg(const CallArgs& a, int i) {
  const ArgValue& v = a.raw(i);
  if (const auto* s = std::get_if<std::string>(&v)) return Padding::parse(*s, "conv1d");
  if (const auto* n = std::get_if<int64_t>(&v)) return Padding::explicit_(*n, *n);
  const std::vector<int64_t> lr = a.integers(i);
  return Padding::explicit_(lr[0], lr[1]);
}

void check_conv_attrs(const char* op, const ConvAttrs& a, int64_t kernel) {
  ENCORE_CHECK(a.stride >= 1 && a.dilation >= 1 && a.pad_l >= 0 && a.pad_r >= 0, ValueError, "[",
               op, "] stride and dilation must be >= 1 and padding >= 0, got ", a.str());
  ENCORE_CHECK(kernel >= 1, ValueError, "[", op, "] kernel size must be >= 1, got ", kernel);
}

// An activation of `channels` channels: (batch, steps, channels), or to_blocked's
// (batch, blocks, steps, block) when `block` is not 0.
bool is_activation(const Tensor& t, int64_t block, int64_t channels) {
  if (block == 0) return t.dim() == 3 && t.shape()[2] == channels;
  return t.dim() == 4 && t.shape()[3] == block && t.shape()[1] == (channels + block - 1) / block;
}
int64_t steps_of(const Shape& s, int64_t block) { return block ? s[2] : s[1]; }
Shape activation_shape(int64_t n, int64_t steps, int64_t channels, int64_t block) {
  if (block == 0) return {n, steps, channels};
  return {n, (channels + block - 1) / block, steps, block};
}

int infer_conv1d(const OpDef&, std::span<const Tensor> in, const Attrs& attrs, TensorMeta* out) {
  const Tensor &x = in[0], &w = in[1];
  const auto& a = attrs.as<ConvAttrs>();
  defs::require_float("conv1d", x);
  defs::require_same_dtype("conv1d", x, w);
  ENCORE_CHECK(a.x_block ? x.dim() == 4 : x.dim() == 3, ShapeError,
               "[conv1d] input must be (batch, steps, channels), got ", x.shape().str());
  ENCORE_CHECK(w.dim() == 3, ShapeError,
               "[conv1d] kernel must be (kernel_size, in_channels, filters), got ",
               w.shape().str());
  check_conv_attrs("conv1d", a, w.shape()[0]);
  ENCORE_CHECK(is_activation(x, a.x_block, w.shape()[1]), ShapeError, "[conv1d] input ",
               x.shape().str(), " has ", x.shape()[x.dim() - 1], " channels but the kernel ",
               w.shape().str(), " expects ", w.shape()[1]);
  const int64_t len = conv_out_length("conv1d", steps_of(x.shape(), a.x_block), w.shape()[0], a);
  out[0] = defs::meta(activation_shape(x.shape()[0], len, w.shape()[2], a.y_block), x.dtype(),
                      x.device());
  return 1;
}

int infer_conv1d_fused(const OpDef& def, std::span<const Tensor> in, const Attrs& attrs,
                       TensorMeta* out) {
  infer_conv1d(def, in, attrs, out);
  const Tensor &w = in[1], &b = in[2];
  defs::require_same_dtype("conv1d_fused", in[0], b);
  ENCORE_CHECK(b.dim() == 1 && b.shape()[0] == w.shape()[2], ShapeError, "[conv1d_fused] bias ",
               b.shape().str(), " does not match the kernel's ", w.shape()[2], " filters");
  const Activation a = attrs.as<ConvAttrs>().activation;
  ENCORE_CHECK(fusable_activation(a), ValueError, "[conv1d_fused] activation ", name(a),
               " cannot be fused: its gradient is not a function of its output; apply it after "
               "conv1d");
  return 1;
}

void bw_conv1d(const BackwardCtx& c, Tensor* g);

// An activation of `channels` channels from one layout (a block, 0: channels-last) to another.
Tensor relayout(const Tensor& t, int64_t from, int64_t to, int64_t channels) {
  if (from == to) return t;
  const Tensor nwc = from ? from_blocked(t, channels) : t;
  return to ? to_blocked(nwc, to) : nwc;
}

void bw_conv1d_fused(const BackwardCtx& c, Tensor* g) {
  const Tensor gy =
      activation_backward(c.attrs.as<ConvAttrs>().activation, c.grads[0], c.outputs[0]);
  const Tensor grads[] = {gy};
  bw_conv1d(BackwardCtx{c.inputs, c.outputs, grads, c.input_metas, c.attrs, c.needs}, g);
  if (c.need(2)) {
    const int64_t block = c.attrs.as<ConvAttrs>().y_block, filters = c.input_shape(1)[2];
    g[2] = block ? sum(gy, {0, 2}).reshape({-1}).slice(0, 0, filters) : sum(gy, {0, 1});
  }
}

void bw_conv1d(const BackwardCtx& c, Tensor* g) {
  ConvAttrs a = c.attrs.as<ConvAttrs>();
  a.activation = Activation::Linear;  // conv1d_fused's epilogue is differentiated by its caller
  a.length = steps_of(c.input_shape(0), a.x_block);
  a.kernel = c.input_shape(1)[0];
  a.channels = c.input_shape(1)[1];
  a.filters = c.input_shape(1)[2];
  const Tensor &x = c.inputs[0], &w = c.inputs[1], &gy = c.grads[0];
  if (!a.x_block && !a.y_block) {  // the native layout
    if (c.need(0)) g[0] = call(conv1d_backward_data_op(), {gy, w}, a);
    if (c.need(1)) g[1] = call(conv1d_backward_filter_op(), {x, gy}, a);
    return;
  }
  // Blocked: each gradient in the layouts oneDNN prefers for it, converted where they are not
  // the forward's (conversion nodes, like the forward's).
  const auto blocks_for = [&](ConvKind kind) {
    return cpu::onednn_preferred_blocks({kind, gy.shape()[0], a.length, a.channels, a.filters,
                                         a.kernel, a.stride, a.dilation, a.pad_l, a.pad_r});
  };
  if (c.need(0)) {
    const auto [bx, by] = blocks_for(ConvKind::BackwardData);
    ConvAttrs d = a;
    d.x_block = bx;
    d.y_block = by;
    const Tensor gx =
        call(conv1d_backward_data_op(), {relayout(gy, a.y_block, by, a.filters), w}, d);
    g[0] = relayout(gx, bx, a.x_block, a.channels);
  }
  if (c.need(1)) {
    const auto [bx, by] = blocks_for(ConvKind::BackwardFilter);
    ConvAttrs f = a;
    f.x_block = bx;
    f.y_block = by;
    g[1] =
        call(conv1d_backward_filter_op(),
             {relayout(x, a.x_block, bx, a.channels), relayout(gy, a.y_block, by, a.filters)}, f);
  }
}

// (grad_out (N, Lout, F), w (K, C, F)) -> grad_x (N, length, C)
int infer_conv1d_backward_data(const OpDef&, std::span<const Tensor> in, const Attrs& attrs,
                               TensorMeta* out) {
  const Tensor &gy = in[0], &w = in[1];
  const auto& a = attrs.as<ConvAttrs>();
  defs::require_same_dtype("conv1d_backward_data", gy, w);
  ENCORE_CHECK(w.dim() == 3, ShapeError,
               "[conv1d_backward_data] kernel must be (kernel_size, "
               "in_channels, filters), got ",
               w.shape().str());
  check_conv_attrs("conv1d_backward_data", a, w.shape()[0]);
  ENCORE_CHECK(is_activation(gy, a.y_block, w.shape()[2]) && a.length >= 0 &&
                   conv_out_length("conv1d_backward_data", a.length, w.shape()[0], a) ==
                       steps_of(gy.shape(), a.y_block),
               ShapeError, "[conv1d_backward_data] gradient ", gy.shape().str(),
               " does not match kernel ", w.shape().str(), " and input length ", a.length);
  out[0] = defs::meta(activation_shape(gy.shape()[0], a.length, w.shape()[1], a.x_block),
                      gy.dtype(), gy.device());
  return 1;
}

// (x (N, L, C), grad_out (N, Lout, F)) -> grad_w (kernel, C, F)
int infer_conv1d_backward_filter(const OpDef&, std::span<const Tensor> in, const Attrs& attrs,
                                 TensorMeta* out) {
  const Tensor &x = in[0], &gy = in[1];
  const auto& a = attrs.as<ConvAttrs>();
  check_conv_attrs("conv1d_backward_filter", a, a.kernel);
  defs::require_same_dtype("conv1d_backward_filter", x, gy);
  const bool blocked = a.x_block || a.y_block;  // then the attributes say the channels and filters
  const int64_t channels = blocked ? a.channels : x.shape()[x.dim() - 1],
                filters = blocked ? a.filters : gy.shape()[gy.dim() - 1];
  ENCORE_CHECK(is_activation(x, a.x_block, channels) && is_activation(gy, a.y_block, filters) &&
                   x.shape()[0] == gy.shape()[0] &&
                   conv_out_length("conv1d_backward_filter", steps_of(x.shape(), a.x_block),
                                   a.kernel, a) == steps_of(gy.shape(), a.y_block),
               ShapeError, "[conv1d_backward_filter] input ", x.shape().str(), " and gradient ",
               gy.shape().str(), " do not match kernel size ", a.kernel);
  out[0] = defs::meta({a.kernel, channels, filters}, x.dtype(), x.device());
  return 1;
}

OpDef& conv1d_op = define_op({
    .name = "conv1d",
    .min_inputs = 2,
    .max_inputs = 2,
    .save = Save::Inputs,
    .contiguous_inputs = true,
    .layout = LayoutRole::Convolution,
    .attrs = &attrs_of<ConvAttrs>,
    .infer = infer_conv1d,
    .backward = bw_conv1d,
    .cpu = cpu::conv1d_kernel(ConvKind::Forward),
    .signature = "conv1d(x: Tensor, w: Tensor, stride: int = 1, padding: str | int | tuple[int, "
                 "int] = 'valid', "
                 "dilation: int = 1) -> Tensor",
    .invoke = [](const CallArgs& a) -> Outputs {
      return {conv1d(a.tensor(0), a.tensor(1), a.integer(2), padding_arg(a, 3), a.integer(4))};
    },
    .doc = "x: (batch, steps, in_channels), w: (kernel_size, in_channels, filters) -> (batch, "
           "out_steps, filters).\n"
           "padding: 'valid', 'same', 'causal' (Keras: step t sees no later step), an int or a "
           "(left, right) pair",
    .examples =
        {
            {.inputs = {{{2, 9, 3}}, {{3, 3, 4}}}, .args = "stride=2, padding='same', dilation=2"},
            {.inputs = {{{2, 11, 3}}, {{3, 3, 2}}}, .args = "stride=3, padding=(2, 0), dilation=2"},
            {.inputs = {{{1, 7, 2}}, {{3, 2, 3}}}, .args = "padding='causal', dilation=3"},
            // One output step (its span is the whole input), whatever the stride.
            {.inputs = {{{2, 5, 3}}, {{3, 3, 2}}}, .args = "stride=4, dilation=2"},
            // Taps that read only padding at every step (left out before the kernel runs).
            {.inputs = {{{1, 4, 2}}, {{3, 2, 2}}}, .args = "padding='same', dilation=5"},
            {.inputs = {{{0, 6, 3}}, {{2, 3, 2}}}, .args = "padding=1"},
            // Where oneDNN's AVX-512 weight gradient is wrong (ops/cpu/onednn_conv.cpp,
            // known_wrong).
            {.inputs = {{{1, 70, 2}}, {{8, 2, 2}}},
             .args = "stride=3, padding=(23, 23), dilation=4"},
        },
});
OpDef& conv1d_fused_op = define_op({
    .name = "conv1d_fused",
    .min_inputs = 3,
    .max_inputs = 3,
    .save = Save::Inputs | Save::Outputs,
    .contiguous_inputs = true,
    .layout = LayoutRole::Convolution,
    .attrs = &attrs_of<ConvAttrs>,
    .infer = infer_conv1d_fused,
    .backward = bw_conv1d_fused,
    .cpu = cpu::conv1d_kernel(ConvKind::Forward),
    .signature = "conv1d_fused(x: Tensor, w: Tensor, b: Tensor, stride: int = 1, "
                 "padding: str | int | tuple[int, int] = 'valid', dilation: int = 1, "
                 "activation: str = 'linear') -> Tensor",
    .invoke = [](const CallArgs& a) -> Outputs {
      return {conv1d_fused(a.tensor(0), a.tensor(1), a.tensor(2), a.integer(3), padding_arg(a, 4),
                           a.integer(5), parse_activation(a.string(6)))};
    },
    .doc = "activation(conv1d(x, w, stride, padding, dilation) + b) in one kernel "
           "(oneDNN post-ops on the CPU)",
    .examples =
        {
            {.inputs = {{{2, 9, 3}}, {{3, 3, 4}}, {{4}}},
             .args = "stride=2, padding='same', dilation=2, activation='tanh'"},
            {.inputs = {{{2, 10, 3}}, {{2, 3, 5}}, {{5}}},
             .args = "stride=3, padding=(1, 3), activation='sigmoid'"},
            {.inputs = {{{1, 6, 4}}, {{3, 4, 2}}, {{2}}}, .args = "padding='causal', dilation=2"},
            {.inputs = {{{0, 5, 2}}, {{2, 2, 3}}, {{3}}},
             .args = "padding='same', activation='tanh'"},
        },
});
OpDef& conv1d_backward_data_row = define_op({
    .name = "conv1d_backward_data",
    .min_inputs = 2,
    .max_inputs = 2,
    .contiguous_inputs = true,
    .layout = LayoutRole::Convolution,
    .attrs = &attrs_of<ConvAttrs>,
    .infer = infer_conv1d_backward_data,
    .cpu = cpu::conv1d_kernel(ConvKind::BackwardData),
    .examples =
        {
            {.inputs = {{{2, 4, 4}}, {{3, 3, 4}}},
             .call = [](std::span<const Tensor> x) -> Outputs {
               return {call(conv1d_backward_data_op(), {x[0], x[1]}, ConvAttrs{2, 1, 1, 1, 8, 3})};
             }},
            {.inputs = {{{2, 4, 4}}, {{3, 3, 4}}},
             .call =
                 [](std::span<const Tensor> x) -> Outputs {  // stride 3, dilation 2, padding (2, 1)
               return {call(conv1d_backward_data_op(), {x[0], x[1]}, ConvAttrs{3, 2, 2, 1, 11, 3})};
             }},
        },
});
OpDef& conv1d_backward_filter_row = define_op({
    .name = "conv1d_backward_filter",
    .min_inputs = 2,
    .max_inputs = 2,
    .contiguous_inputs = true,
    .layout = LayoutRole::Convolution,
    .attrs = &attrs_of<ConvAttrs>,
    .infer = infer_conv1d_backward_filter,
    .cpu = cpu::conv1d_kernel(ConvKind::BackwardFilter),
    .examples =
        {
            {.inputs = {{{2, 8, 3}}, {{2, 4, 4}}},
             .call = [](std::span<const Tensor> x) -> Outputs {
               return {
                   call(conv1d_backward_filter_op(), {x[0], x[1]}, ConvAttrs{2, 1, 1, 1, 8, 3})};
             }},
            {.inputs = {{{2, 11, 3}}, {{2, 4, 4}}},
             .call =
                 [](std::span<const Tensor> x) -> Outputs {  // stride 3, dilation 2, padding (2, 1)
               return {
                   call(conv1d_backward_filter_op(), {x[0], x[1]}, ConvAttrs{3, 2, 2, 1, 11, 3})};
             }},
        },
});
const OpDef& conv1d_backward_data_op() { return conv1d_backward_data_row; }
const OpDef& conv1d_backward_filter_op() { return conv1d_backward_filter_row; }

// A convolution's operands and attributes.
struct ConvCall {
  Tensor x, w;
  ConvAttrs a;
};

// The same convolution without the kernel taps that read only padding at every output step,
// without the input steps no tap reads, and with stride 1 for a single output step. A stride or
// dilation far beyond the input ('causal' at dilation 2**40) otherwise reaches the backend as
// sizes it cannot set up (oneDNN takes int32 sizes, and its cost grows with the padding). Exact:
// the taps left out multiply zeros.
ConvCall without_dead_taps(const char* op, const Tensor& x, const Tensor& w, ConvAttrs a) {
  const int64_t length = x.shape()[1], kernel = w.shape()[0];
  const int64_t out = conv_out_length(op, length, kernel, a);
  auto live = [&](int64_t k) {  // some output step reads an input step through tap k
    const int64_t first = k * a.dilation - a.pad_l;  // what output step 0 reads through k
    const int64_t t = first >= 0 ? 0 : -first / a.stride + (-first % a.stride != 0);
    return t < out && t * a.stride + first < length;
  };
  int64_t lo = 0, hi = kernel - 1;
  while (lo <= hi && !live(lo)) ++lo;
  while (hi > lo && !live(hi)) --hi;
  // No tap reads the input (the output is 0): nothing to leave out.
  if (lo > hi || (lo == 0 && hi == kernel - 1 && (out > 1 || a.stride == 1))) return {x, w, a};
  // The input steps read: from `begin` (output step 0, tap lo) to one before `end`.
  const int64_t begin = lo * a.dilation - a.pad_l;
  const int64_t end = hi * a.dilation - a.pad_l + (out - 1) * a.stride + 1;
  const int64_t from = std::max<int64_t>(begin, 0), to = std::min(end, length);
  ConvAttrs t = a;
  t.pad_l = from - begin;
  t.pad_r = end - to;
  if (lo == hi) t.dilation = 1;
  if (out == 1) t.stride = 1;
  return {from > 0 || to < length ? x.slice(1, from, to) : x, w.slice(0, lo, hi + 1), t};
}

// The convolution `op` of (x, w[, b]) as the layout setting wants it: on the CPU in float32
// with 'blocked', in the layouts oneDNN prefers for the problem, converted by to_blocked /
// from_blocked nodes; otherwise channels-last.
Tensor call_conv(const OpDef& op, const Tensor& x, const Tensor& w, const Tensor* b, ConvAttrs a) {
  const auto plain = [&] { return b ? call(op, {x, w, *b}, a) : call(op, {x, w}, a); };
  if (g_layout.load() == Conv1dLayout::Native || !x.device().is_cpu() ||
      x.dtype() != DType::Float32 || w.dtype() != DType::Float32 || x.numel() == 0 ||
      w.numel() == 0 || x.shape()[2] != w.shape()[1])
    return plain();  // the native layout, or an error the op's shape inference names
  const ConvProblem k{ConvKind::Forward, x.shape()[0], x.shape()[1], x.shape()[2],
                      w.shape()[2],      w.shape()[0], a.stride,     a.dilation,
                      a.pad_l,           a.pad_r,      b != nullptr, a.activation};
  conv_out_length(op.name, k.length, k.kernel, a);  // a ShapeError before oneDNN sees the problem
  const std::pair<int64_t, int64_t> blocks = cpu::onednn_preferred_blocks(k);
  if (blocks == std::pair<int64_t, int64_t>{0, 0}) return plain();
  a.x_block = blocks.first;
  a.y_block = blocks.second;
  a.channels = k.channels;
  a.filters = k.filters;
  const Tensor xb = a.x_block ? to_blocked(x, a.x_block) : x;
  const Tensor yb = b ? call(op, {xb, w, *b}, a) : call(op, {xb, w}, a);
  return a.y_block ? from_blocked(yb, k.filters) : yb;
}

}  // namespace

Tensor conv1d(const Tensor& x, const Tensor& w, int64_t stride, Padding padding, int64_t dilation) {
  ENCORE_CHECK(x.defined() && w.defined(), ValueError, "[conv1d] undefined operand");
  ENCORE_CHECK(
      x.dim() == 3 && w.dim() == 3, ShapeError,
      "[conv1d] expects input (batch, steps, channels) and kernel (size, in, filters), got ",
      x.shape().str(), " and ", w.shape().str());
  ENCORE_CHECK(stride >= 1 && dilation >= 1, ValueError, "[conv1d] stride ", stride,
               " and dilation ", dilation, " must be >= 1");
  ENCORE_CHECK(w.shape()[0] >= 1, ValueError, "[conv1d] kernel size must be >= 1, got kernel ",
               w.shape().str());
  const auto [pl, pr] =
      window_padding("conv1d", x.shape()[1], w.shape()[0], stride, dilation, padding);
  const ConvCall c = without_dead_taps("conv1d", x, w, ConvAttrs{stride, dilation, pl, pr, 0, 0});
  return call_conv(conv1d_op, c.x, c.w, nullptr, c.a);
}

Tensor conv1d_fused(const Tensor& x, const Tensor& w, const Tensor& b, int64_t stride,
                    Padding padding, int64_t dilation, Activation activation) {
  ENCORE_CHECK(x.defined() && w.defined() && b.defined(), ValueError,
               "[conv1d_fused] undefined operand");
  ENCORE_CHECK(
      x.dim() == 3 && w.dim() == 3, ShapeError,
      "[conv1d_fused] expects input (batch, steps, channels) and kernel (size, in, filters), got ",
      x.shape().str(), " and ", w.shape().str());
  ENCORE_CHECK(stride >= 1 && dilation >= 1, ValueError, "[conv1d_fused] stride ", stride,
               " and dilation ", dilation, " must be >= 1");
  ENCORE_CHECK(w.shape()[0] >= 1, ValueError,
               "[conv1d_fused] kernel size must be >= 1, got kernel ", w.shape().str());
  const auto [pl, pr] =
      window_padding("conv1d", x.shape()[1], w.shape()[0], stride, dilation, padding);
  const ConvCall c = without_dead_taps("conv1d_fused", x, w,
                                       ConvAttrs{stride, dilation, pl, pr, 0, 0, activation});
  return call_conv(conv1d_fused_op, c.x, c.w, &b, c.a);
}

void set_conv1d_layout(Conv1dLayout layout) { g_layout.store(layout); }
Conv1dLayout conv1d_layout() { return g_layout.load(); }

Conv1dLayout parse_conv1d_layout(const std::string& s) {
  if (s == "native") return Conv1dLayout::Native;
  if (s == "blocked") return Conv1dLayout::Blocked;
  throw ValueError("[conv1d] unknown layout '" + s + "' (expected native or blocked)");
}

}  // namespace encore
