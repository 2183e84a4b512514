// 1-D convolution, channels-last (x (batch, steps, channels), w (kernel, in, filters), as in
// Keras): rows of the forward op and its two gradient ops, shape inference, the backward
// formula, the CPU kernels and the public function. The CPU runs oneDNN with `nwc` data (our
// layout: activations are never converted) and lets oneDNN choose the weights' layout per
// shape, and with it the implementation: its direct and brgemm convolutions want blocked
// weights, and beat the GEMM-based one that plain `wio` weights allow (measured in
// docs/BENCHMARKS.md). The kernel packs the (K, C, F) weights into that layout before the
// convolution (or unpacks the weight gradient after it), as a BLAS packs its operands: the
// weights are a small fraction of the data a convolution reads. Letting oneDNN choose blocked
// activations too was slower for every benchmark shape (nCw16c: jit/gemm instead of brgconv),
// so it is an opt-in (set_conv1d_layout) that wins on some other shapes (docs/puzzles/4-layout.md):
// then conv1d() asks oneDNN which layout it prefers for the shape and emits to_blocked -> the
// convolution on blocked operands (ConvAttrs' blocks) -> from_blocked, graph nodes like any
// other, whose gradients are the inverse conversions.
// Which of the implementations oneDNN offers a shape runs follows the autotune policy
// (ops/autotune.h: oneDNN's first, the fastest of each timed once, or the GEMM-based one), and
// the choice is kept in the autotune store, which save/load carry to another process.
// Creating the primitives is the CPU's per-shape setup cost, done once per shape through the
// dispatcher's cache of prepared states, so an eager call and its replay run the same code.
// oneDNN has no float64 convolution: float64 (gradcheck, references) runs the plain loops
// below, whose index formula (ops/conv.h) the CUDA direct kernels share.
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "core/ledger.h"
#include "ops/autotune.h"
#include "ops/conv.h"
#include "ops/cpu/onednn.h"
#include "ops/epilogue.h"
#include "ops/functors.h"
#include "ops/defs/common.h"
#include "ops/layout.h"
#include "ops/prepared.h"

namespace encore {
namespace {

const OpDef& conv1d_backward_data_op();
const OpDef& conv1d_backward_filter_op();

enum class ConvKind : uint8_t { Forward, BackwardData, BackwardFilter };

struct ConvKey {
  ConvKind kind;
  int64_t n, length, channels, filters, kernel, stride, dilation, pad_l, pad_r;
  bool bias = false;  // forward only: conv1d_fused's bias and activation (oneDNN post-op)
  Activation activation = Activation::Linear;
  int64_t x_block = 0, y_block = 0;  // ConvAttrs' blocks
  bool operator==(const ConvKey&) const = default;
};

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
  ENCORE_CHECK(a.stride >= 1 && a.dilation >= 1 && a.pad_l >= 0 && a.pad_r >= 0, ValueError,
               "[", op, "] stride and dilation must be >= 1 and padding >= 0, got ", a.str());
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
               "[conv1d] kernel must be (kernel_size, in_channels, filters), got ", w.shape().str());
  check_conv_attrs("conv1d", a, w.shape()[0]);
  ENCORE_CHECK(is_activation(x, a.x_block, w.shape()[1]), ShapeError, "[conv1d] input ", x.shape().str(),
               " has ", x.shape()[x.dim() - 1], " channels but the kernel ", w.shape().str(), " expects ",
               w.shape()[1]);
  const int64_t len = conv_out_length("conv1d", steps_of(x.shape(), a.x_block), w.shape()[0], a);
  out[0] = defs::meta(activation_shape(x.shape()[0], len, w.shape()[2], a.y_block), x.dtype(), x.device());
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
std::pair<int64_t, int64_t> preferred_blocks(const ConvKey& k);

// An activation of `channels` channels from one layout (a block, 0: channels-last) to another.
Tensor relayout(const Tensor& t, int64_t from, int64_t to, int64_t channels) {
  if (from == to) return t;
  const Tensor nwc = from ? from_blocked(t, channels) : t;
  return to ? to_blocked(nwc, to) : nwc;
}

void bw_conv1d_fused(const BackwardCtx& c, Tensor* g) {
  const Tensor gy = activation_backward(c.attrs.as<ConvAttrs>().activation, c.grads[0], c.outputs[0]);
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
    return preferred_blocks({kind, gy.shape()[0], a.length, a.channels, a.filters, a.kernel, a.stride, a.dilation,
                             a.pad_l, a.pad_r});
  };
  if (c.need(0)) {
    const auto [bx, by] = blocks_for(ConvKind::BackwardData);
    ConvAttrs d = a;
    d.x_block = bx;
    d.y_block = by;
    const Tensor gx = call(conv1d_backward_data_op(), {relayout(gy, a.y_block, by, a.filters), w}, d);
    g[0] = relayout(gx, bx, a.x_block, a.channels);
  }
  if (c.need(1)) {
    const auto [bx, by] = blocks_for(ConvKind::BackwardFilter);
    ConvAttrs f = a;
    f.x_block = bx;
    f.y_block = by;
    g[1] = call(conv1d_backward_filter_op(),
                {relayout(x, a.x_block, bx, a.channels), relayout(gy, a.y_block, by, a.filters)}, f);
  }
}

// (grad_out (N, Lout, F), w (K, C, F)) -> grad_x (N, length, C)
int infer_conv1d_backward_data(const OpDef&, std::span<const Tensor> in, const Attrs& attrs, TensorMeta* out) {
  const Tensor &gy = in[0], &w = in[1];
  const auto& a = attrs.as<ConvAttrs>();
  defs::require_same_dtype("conv1d_backward_data", gy, w);
  ENCORE_CHECK(w.dim() == 3, ShapeError, "[conv1d_backward_data] kernel must be (kernel_size, "
               "in_channels, filters), got ", w.shape().str());
  check_conv_attrs("conv1d_backward_data", a, w.shape()[0]);
  ENCORE_CHECK(is_activation(gy, a.y_block, w.shape()[2]) && a.length >= 0 &&
                   conv_out_length("conv1d_backward_data", a.length, w.shape()[0], a) ==
                       steps_of(gy.shape(), a.y_block),
               ShapeError, "[conv1d_backward_data] gradient ", gy.shape().str(),
               " does not match kernel ", w.shape().str(), " and input length ", a.length);
  out[0] = defs::meta(activation_shape(gy.shape()[0], a.length, w.shape()[1], a.x_block), gy.dtype(), gy.device());
  return 1;
}

// (x (N, L, C), grad_out (N, Lout, F)) -> grad_w (kernel, C, F)
int infer_conv1d_backward_filter(const OpDef&, std::span<const Tensor> in, const Attrs& attrs, TensorMeta* out) {
  const Tensor &x = in[0], &gy = in[1];
  const auto& a = attrs.as<ConvAttrs>();
  check_conv_attrs("conv1d_backward_filter", a, a.kernel);
  defs::require_same_dtype("conv1d_backward_filter", x, gy);
  const bool blocked = a.x_block || a.y_block;  // then the attributes say the channels and filters
  const int64_t channels = blocked ? a.channels : x.shape()[x.dim() - 1],
                filters = blocked ? a.filters : gy.shape()[gy.dim() - 1];
  ENCORE_CHECK(is_activation(x, a.x_block, channels) && is_activation(gy, a.y_block, filters) &&
                   x.shape()[0] == gy.shape()[0] &&
                   conv_out_length("conv1d_backward_filter", steps_of(x.shape(), a.x_block), a.kernel, a) ==
                       steps_of(gy.shape(), a.y_block),
               ShapeError, "[conv1d_backward_filter] input ", x.shape().str(), " and gradient ",
               gy.shape().str(), " do not match kernel size ", a.kernel);
  out[0] = defs::meta({a.kernel, channels, filters}, x.dtype(), x.device());
  return 1;
}


template <class T>
void conv1d_reference(const ConvGeometry& g, const T* x, const T* w, T* y) {
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t t = 0; t < g.out_length; ++t) {
      T* yr = y + (n * g.out_length + t) * g.filters;
      for (int64_t f = 0; f < g.filters; ++f) yr[f] = T(0);
      for (int64_t k = 0; k < g.kernel; ++k) {
        const int64_t i = g.input_step(t, k);
        if (i < 0 || i >= g.length) continue;
        for (int64_t ch = 0; ch < g.channels; ++ch) {
          const T xv = x[(n * g.length + i) * g.channels + ch];
          const T* wr = w + (k * g.channels + ch) * g.filters;
          for (int64_t f = 0; f < g.filters; ++f) yr[f] += xv * wr[f];
        }
      }
    }
}

template <class T>
void conv1d_backward_data_reference(const ConvGeometry& g, const T* gy, const T* w, T* gx) {
  for (int64_t i = 0; i < g.n * g.length * g.channels; ++i) gx[i] = T(0);
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t t = 0; t < g.out_length; ++t) {
      const T* gr = gy + (n * g.out_length + t) * g.filters;
      for (int64_t k = 0; k < g.kernel; ++k) {
        const int64_t i = g.input_step(t, k);
        if (i < 0 || i >= g.length) continue;
        for (int64_t ch = 0; ch < g.channels; ++ch) {
          const T* wr = w + (k * g.channels + ch) * g.filters;
          T acc = T(0);
          for (int64_t f = 0; f < g.filters; ++f) acc += gr[f] * wr[f];
          gx[(n * g.length + i) * g.channels + ch] += acc;
        }
      }
    }
}

template <class T>
void conv1d_backward_filter_reference(const ConvGeometry& g, const T* x, const T* gy, T* gw) {
  for (int64_t i = 0; i < g.kernel * g.channels * g.filters; ++i) gw[i] = T(0);
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t t = 0; t < g.out_length; ++t) {
      const T* gr = gy + (n * g.out_length + t) * g.filters;
      for (int64_t k = 0; k < g.kernel; ++k) {
        const int64_t i = g.input_step(t, k);
        if (i < 0 || i >= g.length) continue;
        for (int64_t ch = 0; ch < g.channels; ++ch) {
          const T xv = x[(n * g.length + i) * g.channels + ch];
          T* wr = gw + (k * g.channels + ch) * g.filters;
          for (int64_t f = 0; f < g.filters; ++f) wr[f] += xv * gr[f];
        }
      }
    }
}


struct ConvPrimitive {
  dnnl::primitive primitive;
  // The implementation's layouts of the x, w, y roles (see roles() below), and ours.
  // The activations' layouts are ours (nwc, or the blocks the op's attributes name).
  dnnl::memory::desc src, weights, dst, scratchpad, bias;  // bias: conv1d_fused only
  dnnl::memory::desc user_weights;
  // Between our `wio` weights and the implementation's layout, when they differ: wio -> its
  // layout before a forward or backward-data convolution, its layout -> wio after a
  // backward-filter one.
  std::optional<dnnl::reorder> weights_reorder;
  std::string impl;
};

std::atomic<Conv1dLayout> g_layout{Conv1dLayout::Native};

using cpu::onednn_engine;

constexpr const char* kOps[] = {"conv1d", "conv1d_backward_data", "conv1d_backward_filter"};

// The problem without its kind: the autotune store's key (the op names the kind).
std::string shape_key(const ConvKey& k) {
  return detail::cat("N=", k.n, " L=", k.length, " C=", k.channels, " F=", k.filters, " K=", k.kernel,
                     " stride=", k.stride, " dilation=", k.dilation, " pad=(", k.pad_l, ", ", k.pad_r, ")",
                     k.bias ? " +bias" : "", k.activation == Activation::Linear ? "" : detail::cat(" +", name(k.activation)),
                     k.x_block || k.y_block ? detail::cat(" blocked=(", k.x_block, ", ", k.y_block, ")") : "");
}

std::string describe(const ConvKey& k) {
  static constexpr const char* kKinds[] = {"forward", "backward_data", "backward_filter"};
  return detail::cat(kKinds[static_cast<int>(k.kind)], " ", shape_key(k));
}

// The primitive, its scratchpad, the layout it wants the weights in and its name.

// A reorder from `ours` to the implementation's `its` (or back, `to_ours`), none when equal.
std::optional<dnnl::reorder> reorder_between(const dnnl::memory::desc& ours, const dnnl::memory::desc& its,
                                             bool to_ours) {
  if (ours == its) return std::nullopt;
  return dnnl::reorder(dnnl::reorder::primitive_desc(onednn_engine(), to_ours ? its : ours, onednn_engine(), to_ours ? ours : its));
}

template <class Pd>
void adopt(ConvPrimitive& p, ConvKind kind, dnnl::primitive primitive, const Pd& pd, const dnnl::memory::desc& weights) {
  p.primitive = std::move(primitive);
  p.scratchpad = pd.scratchpad_desc();
  p.weights = weights;
  p.impl = pd.impl_info_str();
  p.weights_reorder = reorder_between(p.user_weights, p.weights, kind == ConvKind::BackwardFilter);
}

// One call: the weights packed into the implementation's layout (unpacked after a
// backward-filter convolution), then the convolution. x, w, y are the (x, w, y) roles of
// roles() below; bias only for conv1d_fused.
void run(const ConvPrimitive& p, ConvKind kind, void* x_data, void* w_data, void* y_data, void* bias) {
  // Scratch memory per thread, not per primitive: threads may run one primitive at once. It
  // holds the primitive's scratchpad, then the weights in its layout where it differs from
  // ours, each 64-byte aligned.
  constexpr size_t kAlign = 64;
  const size_t pad_bytes = (p.scratchpad.get_size() + kAlign - 1) / kAlign * kAlign;
  const size_t w_bytes = p.weights_reorder ? p.weights.get_size() : 0;
  std::byte* base = cpu::thread_scratch(0, pad_bytes + w_bytes);
  dnnl::stream& stream = cpu::onednn_stream();
  dnnl::memory x(p.src, onednn_engine(), x_data), y(p.dst, onednn_engine(), y_data), w_user(p.user_weights, onednn_engine(), w_data);
  dnnl::memory w = p.weights_reorder ? dnnl::memory(p.weights, onednn_engine(), base + pad_bytes) : w_user;
  if (p.weights_reorder && kind != ConvKind::BackwardFilter) p.weights_reorder->execute(stream, w_user, w);
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SCRATCHPAD, dnnl::memory(p.scratchpad, onednn_engine(), base)}};
  switch (kind) {
    case ConvKind::Forward:
      args.insert({{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, y}});
      if (bias) args.insert({DNNL_ARG_BIAS, dnnl::memory(p.bias, onednn_engine(), bias)});
      break;
    case ConvKind::BackwardData: args.insert({{DNNL_ARG_DIFF_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DIFF_DST, y}}); break;
    case ConvKind::BackwardFilter: args.insert({{DNNL_ARG_SRC, x}, {DNNL_ARG_DIFF_WEIGHTS, w}, {DNNL_ARG_DIFF_DST, y}}); break;
  }
  p.primitive.execute(stream, args);
  if (p.weights_reorder && kind == ConvKind::BackwardFilter) p.weights_reorder->execute(stream, w, w_user);
  stream.wait();
}

// A call of `p` on scratch operands in ms: the fastest of three after an untimed one (JIT code
// and pages warm); one call alone is at the mercy of whatever else the machine does.
double time_call(const ConvPrimitive& p, ConvKind kind) {
  std::vector<float> x(p.src.get_size() / sizeof(float), 0.5f), w(p.user_weights.get_size() / sizeof(float), 0.5f),
      y(p.dst.get_size() / sizeof(float), 0.5f), b(p.bias.get_size() / sizeof(float), 0.5f);
  run(p, kind, x.data(), w.data(), y.data(), b.data());
  double best = INFINITY;
  for (int i = 0; i < 3; ++i) {
    const int64_t start = now_ns();
    run(p, kind, x.data(), w.data(), y.data(), b.data());
    best = std::min(best, (now_ns() - start) / 1e6);
  }
  return best;
}

// Which of the implementations oneDNN offers for this problem (`make_pd()` makes its primitive
// descriptor at the first, its preference; next_impl() walks the others): a choice stored
// earlier (this process, or a loaded file) if oneDNN still offers it, else the policy's —
// heuristic: oneDNN's first; off: the GEMM-based one where offered; exhaustive: the fastest, each
// timed on scratch operands (weights packing included). The choice goes to the autotune store.
template <class Primitive, class MakePd, class LayoutsOf>
void choose(const ConvKey& k, ConvPrimitive& p, MakePd make_pd, LayoutsOf layouts_of) {
  // oneDNN's primitive cache (v2.6) can hand back the primitive of another implementation of
  // the same problem, which would time one implementation under every name: off while
  // choosing (the dispatcher's cache keeps ours per shape; it prepares one shape at a time).
  struct NoPrimitiveCache {
    const int capacity = dnnl::get_primitive_cache_capacity();
    NoPrimitiveCache() { dnnl::set_primitive_cache_capacity(0); }
    ~NoPrimitiveCache() { dnnl::set_primitive_cache_capacity(capacity); }
  } no_cache;
  std::vector<std::string> names;
  for (auto pd = make_pd();;) {
    names.push_back(pd.impl_info_str());
    if (!pd.next_impl()) break;
  }
  const auto take = [&](size_t i) {
    auto pd = make_pd();
    for (size_t j = 0; j < i; ++j) pd.next_impl();
    adopt(p, k.kind, Primitive(pd), pd, layouts_of(pd));
  };
  const char* op = kOps[static_cast<int>(k.kind)];
  const std::string key = shape_key(k) + " float32 cpu";
  if (const auto e = autotune::detail::find(op, key)) {
    const auto it = std::find(names.begin(), names.end(), e->algorithm);
    if (it != names.end()) {
      take(static_cast<size_t>(it - names.begin()));
      autotune::detail::note_reused();
      return;
    }
  }
  const autotune::Policy policy = autotune::policy();
  autotune::Entry e;
  e.op = op;
  e.key = key;
  e.backend = "onednn";
  e.source = std::string(autotune::name(policy));
  size_t pick = 0;
  if (policy == autotune::Policy::Off) {
    const auto gemm = std::find_if(names.begin(), names.end(), [](const std::string& n) { return n.find("gemm") != std::string::npos && n.find("brg") == std::string::npos; });
    if (gemm != names.end()) pick = static_cast<size_t>(gemm - names.begin());
  } else if (policy == autotune::Policy::Exhaustive) {
    for (size_t i = 0; i < names.size(); ++i) {
      // oneDNN's reference implementations are its correctness baseline, far slower (often 100x)
      // than any other: timing them would only make the search long.
      if (names[i].starts_with("ref") && i > 0) continue;
      take(i);
      const double ms = time_call(p, k.kind);
      e.timings.push_back({names[i], ms});
      if (e.time_ms < 0 || ms < e.time_ms) {
        e.time_ms = ms;
        pick = i;
      }
    }
  }
  take(pick);
  e.algorithm = names[pick];
  e.workspace_bytes = p.scratchpad.get_size();
  autotune::detail::store(std::move(e));
}

// An activation's layout: nwc (block 0), nCw{block}c (4, 8 or 16: the blocks to_blocked tensors
// of a convolution have), or the implementation's choice (block -1).
dnnl::memory::desc activation_desc(int64_t n, int64_t channels, int64_t steps, int64_t block) {
  using tag = dnnl::memory::format_tag;
  const tag t = block < 0    ? tag::any
                : block == 0 ? tag::nwc
                : block == 4 ? tag::nCw4c
                : block == 8 ? tag::nCw8c
                             : tag::nCw16c;
  return dnnl::memory::desc({n, channels, steps}, dnnl::memory::data_type::f32, t);
}

// The block of an activation layout oneDNN picked, 0 for nwc or a layout to_blocked has not.
int64_t block_of(const dnnl::memory::desc& d) {
  const dnnl::memory::dims dims = d.dims();
  for (const int64_t b : {16, 8, 4})
    if (d == activation_desc(dims[0], dims[1], dims[2], b)) return b;
  return 0;
}

int64_t out_length(const ConvKey& k) {
  return (k.length + k.pad_l + k.pad_r - k.dilation * (k.kernel - 1) - 1) / k.stride + 1;
}

dnnl::primitive_attr forward_attr(const ConvKey& k) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (k.activation != Activation::Linear) attr.set_post_ops(cpu::activation_post_ops(k.activation));
  return attr;
}

dnnl::convolution_forward::desc forward_desc(const ConvKey& k, const dnnl::memory::desc& src,
                                             const dnnl::memory::desc& dst) {
  using Fwd = dnnl::convolution_forward;
  const dnnl::memory::desc any_weights({k.filters, k.channels, k.kernel}, dnnl::memory::data_type::f32,
                                       dnnl::memory::format_tag::any);
  const dnnl::memory::dims strides{k.stride}, dilates{k.dilation - 1}, pl{k.pad_l}, pr{k.pad_r};
  const auto prop = dnnl::prop_kind::forward_training;
  const auto alg = dnnl::algorithm::convolution_direct;
  if (!k.bias) return Fwd::desc(prop, alg, src, any_weights, dst, strides, dilates, pl, pr);
  const dnnl::memory::desc bias({k.filters}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::a);
  return Fwd::desc(prop, alg, src, any_weights, bias, dst, strides, dilates, pl, pr);
}

// The x and y blocks oneDNN's preferred forward implementation wants for this problem
// (k.x_block, k.y_block ignored), asked once per problem.
// The x and y blocks oneDNN's preferred implementation of k's kind wants (k.x_block, k.y_block
// ignored), asked once per problem. A backward pass may prefer other layouts than its forward
// (fixed to the forward's, oneDNN may offer only its reference implementation).
std::pair<int64_t, int64_t> preferred_blocks(const ConvKey& k) {
  static std::mutex mutex;
  static std::map<std::string, std::pair<int64_t, int64_t>> known;
  const std::string key = describe(k);
  std::lock_guard lock(mutex);
  if (const auto it = known.find(key); it != known.end()) return it->second;
  if (known.size() >= 4096) known.erase(known.begin());
  const dnnl::memory::desc src = activation_desc(k.n, k.channels, k.length, -1),
                           dst = activation_desc(k.n, k.filters, out_length(k), -1);
  const dnnl::convolution_forward::primitive_desc fwd(forward_desc(k, src, dst), forward_attr(k), onednn_engine());
  std::pair<int64_t, int64_t> blocks{block_of(fwd.src_desc()), block_of(fwd.dst_desc())};
  const dnnl::memory::desc any_weights({k.filters, k.channels, k.kernel}, dnnl::memory::data_type::f32,
                                       dnnl::memory::format_tag::any);
  const dnnl::memory::dims strides{k.stride}, dilates{k.dilation - 1}, pl{k.pad_l}, pr{k.pad_r};
  const auto alg = dnnl::algorithm::convolution_direct;
  if (k.kind == ConvKind::BackwardData) {
    using Bwd = dnnl::convolution_backward_data;
    const Bwd::primitive_desc pd(Bwd::desc(alg, src, any_weights, dst, strides, dilates, pl, pr), onednn_engine(), fwd);
    blocks = {block_of(pd.diff_src_desc()), block_of(pd.diff_dst_desc())};
  } else if (k.kind == ConvKind::BackwardFilter) {
    using Bwd = dnnl::convolution_backward_weights;
    const Bwd::primitive_desc pd(Bwd::desc(alg, src, any_weights, dst, strides, dilates, pl, pr), onednn_engine(), fwd);
    blocks = {block_of(pd.src_desc()), block_of(pd.diff_dst_desc())};
  }
  return known[key] = blocks;
}

std::shared_ptr<ConvPrimitive> create(const ConvKey& k) {
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  auto p = std::make_shared<ConvPrimitive>();
  p->src = activation_desc(k.n, k.channels, k.length, k.x_block);
  p->dst = activation_desc(k.n, k.filters, out_length(k), k.y_block);
  p->user_weights = dnnl::memory::desc({k.filters, k.channels, k.kernel}, dt::f32, tag::wio);
  const dnnl::memory::desc any_weights({k.filters, k.channels, k.kernel}, dt::f32, tag::any);
  const dnnl::memory::desc &src = p->src, &dst = p->dst;
  if (k.bias) p->bias = dnnl::memory::desc({k.filters}, dt::f32, tag::a);
  const dnnl::memory::dims strides{k.stride}, dilates{k.dilation - 1}, pl{k.pad_l}, pr{k.pad_r};
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const auto alg = dnnl::algorithm::convolution_direct;
  const dnnl::primitive_attr fwd_attr = forward_attr(k);
  // The operation descriptors outlive every primitive descriptor made from them: a primitive
  // descriptor's next_impl() reads its operation descriptor again.
  using Fwd = dnnl::convolution_forward;
  using BwdData = dnnl::convolution_backward_data;
  using BwdWeights = dnnl::convolution_backward_weights;
  const Fwd::desc fwd_desc = forward_desc(k, src, dst);
  const BwdData::desc data_desc(alg, src, any_weights, dst, strides, dilates, pl, pr);
  const BwdWeights::desc weights_desc(alg, src, any_weights, dst, strides, dilates, pl, pr);
  const auto fwd_pd = [&] { return Fwd::primitive_desc(fwd_desc, fwd_attr, onednn_engine()); };
  switch (k.kind) {
    case ConvKind::Forward:
      choose<Fwd>(k, *p, fwd_pd, [](const auto& pd) { return pd.weights_desc(); });
      break;
    case ConvKind::BackwardData: {
      const Fwd::primitive_desc hint = fwd_pd();
      choose<BwdData>(k, *p, [&] { return BwdData::primitive_desc(data_desc, attr, onednn_engine(), hint); },
                      [](const auto& pd) { return pd.weights_desc(); });
      break;
    }
    case ConvKind::BackwardFilter: {
      const Fwd::primitive_desc hint = fwd_pd();
      choose<BwdWeights>(k, *p, [&] { return BwdWeights::primitive_desc(weights_desc, attr, onednn_engine(), hint); },
                         [](const auto& pd) { return pd.diff_weights_desc(); });
      break;
    }
  }
  if (p->weights_reorder) p->impl += " (weights in its layout)";
  return p;
}

std::mutex g_chosen_mutex;
std::map<std::string, std::string>& chosen() {  // key -> implementation, for conv1d_primitives()
  static std::map<std::string, std::string> m;
  return m;
}

// Roles of the kernel's tensors: (x, w, y) for the forward op, (gx, w, gy) for backward
// data, (x, gw, gy) for backward filter.
struct Roles {
  const TensorRef *x, *w, *y;
};

template <ConvKind Kind> Roles roles(const KernelCtx& c) {
  if constexpr (Kind == ConvKind::Forward) return {&c.in[0], &c.in[1], &c.out[0]};
  else if constexpr (Kind == ConvKind::BackwardData) return {&c.out[0], &c.in[1], &c.in[0]};
  else return {&c.in[0], &c.out[0], &c.in[1]};
}

template <ConvKind Kind> ConvKey key_of(const KernelCtx& c) {
  const auto& a = c.attrs.as<ConvAttrs>();
  const Roles r = roles<Kind>(c);
  return {Kind, r.x->shape[0], steps_of(r.x->shape, a.x_block), r.w->shape[1], r.w->shape[2], r.w->shape[0],
          a.stride, a.dilation, a.pad_l, a.pad_r, Kind == ConvKind::Forward && c.in.size() == 3,
          Kind == ConvKind::Forward ? a.activation : Activation::Linear, a.x_block, a.y_block};
}

// An empty batch, sequence, channel or filter axis: oneDNN has no primitive for it, and the
// result is empty or a sum over nothing (zeros).
bool empty(const Roles& r) { return r.x->numel() == 0 || r.w->numel() == 0 || r.y->numel() == 0; }

// The per-shape setup, called once per geometry by the dispatcher's cache.
template <ConvKind Kind> std::shared_ptr<void> prepare(const KernelCtx& c) {
  if (c.in[0].dtype != DType::Float32 || empty(roles<Kind>(c))) return nullptr;
  const ConvKey key = key_of<Kind>(c);
  std::shared_ptr<ConvPrimitive> p;
  try {
    p = create(key);
  } catch (const dnnl::error& e) {
    throw BackendError(std::string("[conv1d] oneDNN primitive creation failed: ") + e.what());
  }
  std::lock_guard lock(g_chosen_mutex);
  // Bounded like the cache of prepared states (a log of choices, not of primitives).
  if (chosen().size() >= 4096) chosen().erase(chosen().begin());
  chosen()[describe(key)] = p->impl;
  return p;
}

std::string describe_state(const void* state) { return static_cast<const ConvPrimitive*>(state)->impl; }

// conv1d_fused's relu or hard_sigmoid, which oneDNN does not apply
// (cpu::activation_after_primitive), over the real filters only: a blocked output's padding
// lanes stay zero, as oneDNN keeps them.
void apply_activation(const TensorRef& y, const ConvAttrs& a) {
  if (!a.y_block) {
    const int64_t filters = y.shape[2];
    if (filters) bias_activation(y.ptr<float>(), nullptr, y.numel() / filters, filters, a.activation);
    return;
  }
  const int64_t batch = y.shape[0], blocks = y.shape[1], steps = y.shape[2], block = y.shape[3];
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t k = 0; k < blocks; ++k)
      bias_activation(y.ptr<float>() + (n * blocks + k) * steps * block, nullptr, steps,
                      std::min(block, a.filters - k * block), a.activation, block);
}

template <ConvKind Kind> void kernel(const KernelCtx& c) {
  const Roles r = roles<Kind>(c);
  const auto& a = c.attrs.as<ConvAttrs>();
  // conv1d_fused's bias and activation where oneDNN does not apply them.
  auto epilogue = [&]<class T>() {
    if constexpr (Kind == ConvKind::Forward)
      if (c.in.size() == 3)
        bias_activation(r.y->ptr<T>(), c.in[2].ptr<const T>(), r.y->shape[0] * r.y->shape[1], r.y->shape[2],
                        a.activation);
  };
  if (empty(r)) {
    std::memset(c.out[0].data, 0, c.out[0].numel() * itemsize(c.out[0].dtype));
    visit_float(c.out[0].dtype, epilogue);
    return;
  }
  if (c.in[0].dtype == DType::Float64) {
    const ConvGeometry g{r.x->shape[0], r.x->shape[1], r.x->shape[2], r.w->shape[2], r.w->shape[0],
                         r.y->shape[1], a.stride, a.dilation, a.pad_l};
    if constexpr (Kind == ConvKind::Forward) {
      conv1d_reference(g, r.x->ptr<const double>(), r.w->ptr<const double>(), r.y->ptr<double>());
      epilogue.template operator()<double>();
    } else if constexpr (Kind == ConvKind::BackwardData)
      conv1d_backward_data_reference(g, r.y->ptr<const double>(), r.w->ptr<const double>(), r.x->ptr<double>());
    else
      conv1d_backward_filter_reference(g, r.x->ptr<const double>(), r.y->ptr<const double>(), r.w->ptr<double>());
    return;
  }
  run(*static_cast<const ConvPrimitive*>(c.state), Kind, r.x->data, r.w->data, r.y->data,
      Kind == ConvKind::Forward && c.in.size() == 3 ? c.in[2].data : nullptr);
  if constexpr (Kind == ConvKind::Forward)
    if (c.in.size() == 3 && cpu::activation_after_primitive(a.activation)) apply_activation(*r.y, a);
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
    .cpu = {kernel<ConvKind::Forward>, prepare<ConvKind::Forward>, describe_state},
    .signature = "conv1d(x: Tensor, w: Tensor, stride: int = 1, padding: str | int | tuple[int, int] = 'valid', "
                 "dilation: int = 1) -> Tensor",
    .invoke = [](const CallArgs& a) -> Outputs {
      return {conv1d(a.tensor(0), a.tensor(1), a.integer(2), padding_arg(a, 3), a.integer(4))};
    },
    .doc = "x: (batch, steps, in_channels), w: (kernel_size, in_channels, filters) -> (batch, out_steps, filters).\n"
            "padding: 'valid', 'same', 'causal' (Keras: step t sees no later step), an int or a (left, right) pair",
    .example = {.inputs = {{{2, 9, 3}}, {{3, 3, 4}}}, .args = "stride=2, padding='same', dilation=2"},
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
    .cpu = {kernel<ConvKind::Forward>, prepare<ConvKind::Forward>, describe_state},
    .signature = "conv1d_fused(x: Tensor, w: Tensor, b: Tensor, stride: int = 1, "
                 "padding: str | int | tuple[int, int] = 'valid', dilation: int = 1, "
                 "activation: str = 'linear') -> Tensor",
    .invoke = [](const CallArgs& a) -> Outputs {
      return {conv1d_fused(a.tensor(0), a.tensor(1), a.tensor(2), a.integer(3), padding_arg(a, 4),
                           a.integer(5), parse_activation(a.string(6)))};
    },
    .doc = "activation(conv1d(x, w, stride, padding, dilation) + b) in one kernel "
           "(oneDNN post-ops on the CPU)",
    .example = {.inputs = {{{2, 9, 3}}, {{3, 3, 4}}, {{4}}},
                .args = "stride=2, padding='same', dilation=2, activation='tanh'"},
});
OpDef& conv1d_backward_data_row = define_op({
    .name = "conv1d_backward_data",
    .min_inputs = 2,
    .max_inputs = 2,
    .contiguous_inputs = true,
    .layout = LayoutRole::Convolution,
    .attrs = &attrs_of<ConvAttrs>,
    .infer = infer_conv1d_backward_data,
    .cpu = {kernel<ConvKind::BackwardData>, prepare<ConvKind::BackwardData>, describe_state},
    .example = {.inputs = {{{2, 4, 4}}, {{3, 3, 4}}},
                .call = [](std::span<const Tensor> x) -> Outputs {
                  return {call(conv1d_backward_data_op(), {x[0], x[1]}, ConvAttrs{2, 1, 1, 1, 8, 3})};
                }},
});
OpDef& conv1d_backward_filter_row = define_op({
    .name = "conv1d_backward_filter",
    .min_inputs = 2,
    .max_inputs = 2,
    .contiguous_inputs = true,
    .layout = LayoutRole::Convolution,
    .attrs = &attrs_of<ConvAttrs>,
    .infer = infer_conv1d_backward_filter,
    .cpu = {kernel<ConvKind::BackwardFilter>, prepare<ConvKind::BackwardFilter>, describe_state},
    .example = {.inputs = {{{2, 8, 3}}, {{2, 4, 4}}},
                .call = [](std::span<const Tensor> x) -> Outputs {
                  return {call(conv1d_backward_filter_op(), {x[0], x[1]}, ConvAttrs{2, 1, 1, 1, 8, 3})};
                }},
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
  if (g_layout.load() == Conv1dLayout::Native || !x.device().is_cpu() || x.dtype() != DType::Float32 ||
      w.dtype() != DType::Float32 || x.numel() == 0 || w.numel() == 0 || x.shape()[2] != w.shape()[1])
    return plain();  // the native layout, or an error the op's shape inference names
  const ConvKey k{ConvKind::Forward, x.shape()[0], x.shape()[1], x.shape()[2], w.shape()[2], w.shape()[0],
                  a.stride, a.dilation, a.pad_l, a.pad_r, b != nullptr, a.activation};
  conv_out_length(op.name, k.length, k.kernel, a);  // a ShapeError before oneDNN sees the problem
  std::pair<int64_t, int64_t> blocks;
  try {
    blocks = preferred_blocks(k);
  } catch (const dnnl::error& e) {
    throw BackendError(std::string("[conv1d] oneDNN primitive creation failed: ") + e.what());
  }
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
  ENCORE_CHECK(x.dim() == 3 && w.dim() == 3, ShapeError,
               "[conv1d] expects input (batch, steps, channels) and kernel (size, in, filters), got ",
               x.shape().str(), " and ", w.shape().str());
  ENCORE_CHECK(stride >= 1 && dilation >= 1, ValueError, "[conv1d] stride ", stride, " and dilation ",
               dilation, " must be >= 1");
  ENCORE_CHECK(w.shape()[0] >= 1, ValueError, "[conv1d] kernel size must be >= 1, got kernel ",
               w.shape().str());
  const auto [pl, pr] = window_padding("conv1d", x.shape()[1], w.shape()[0], stride, dilation, padding);
  const ConvCall c = without_dead_taps("conv1d", x, w, ConvAttrs{stride, dilation, pl, pr, 0, 0});
  return call_conv(conv1d_op, c.x, c.w, nullptr, c.a);
}

Tensor conv1d_fused(const Tensor& x, const Tensor& w, const Tensor& b, int64_t stride,
                    Padding padding, int64_t dilation, Activation activation) {
  ENCORE_CHECK(x.defined() && w.defined() && b.defined(), ValueError,
               "[conv1d_fused] undefined operand");
  ENCORE_CHECK(x.dim() == 3 && w.dim() == 3, ShapeError,
               "[conv1d_fused] expects input (batch, steps, channels) and kernel (size, in, filters), got ",
               x.shape().str(), " and ", w.shape().str());
  ENCORE_CHECK(stride >= 1 && dilation >= 1, ValueError, "[conv1d_fused] stride ", stride, " and dilation ",
               dilation, " must be >= 1");
  ENCORE_CHECK(w.shape()[0] >= 1, ValueError, "[conv1d_fused] kernel size must be >= 1, got kernel ",
               w.shape().str());
  const auto [pl, pr] = window_padding("conv1d", x.shape()[1], w.shape()[0], stride, dilation, padding);
  const ConvCall c = without_dead_taps("conv1d_fused", x, w,
                                       ConvAttrs{stride, dilation, pl, pr, 0, 0, activation});
  return call_conv(conv1d_fused_op, c.x, c.w, &b, c.a);
}

std::vector<ConvPrimitiveInfo> conv1d_primitives() {
  std::lock_guard lock(g_chosen_mutex);
  std::vector<ConvPrimitiveInfo> out;
  for (const auto& [key, impl] : chosen()) out.push_back({key, impl});
  return out;
}

void set_conv1d_layout(Conv1dLayout layout) {
  g_layout.store(layout);
}
Conv1dLayout conv1d_layout() { return g_layout.load(); }

Conv1dLayout parse_conv1d_layout(const std::string& s) {
  if (s == "native") return Conv1dLayout::Native;
  if (s == "blocked") return Conv1dLayout::Blocked;
  throw ValueError("[conv1d] unknown layout '" + s + "' (expected native or blocked)");
}

void clear_conv1d_primitives() {
  {
    std::lock_guard lock(g_chosen_mutex);
    chosen().clear();
  }
  clear_prepared();
  // oneDNN keeps its own cache of primitives: without flushing it, a shape seen before would
  // be "created" again at no cost and the setup would look free.
  const int capacity = dnnl::get_primitive_cache_capacity();
  dnnl::set_primitive_cache_capacity(0);
  dnnl::set_primitive_cache_capacity(capacity);
}

}  // namespace encore
