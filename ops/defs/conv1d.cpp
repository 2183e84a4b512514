// 1-D convolution, channels-last (x (batch, steps, channels), w (kernel, in, filters), as in
// Keras): rows of the forward op and its two gradient ops, shape inference, the backward
// formula, the CPU kernels and the public function. The CPU runs oneDNN with `nwc` data and
// `wio` weights (our layout), so no layout conversion is ever inserted; creating a primitive is
// the CPU's per-shape setup cost, done once per shape through the dispatcher's cache of
// prepared states. oneDNN has no float64 convolution: float64 (gradcheck, references) runs the
// plain loops below, whose index formula (ops/conv.h) the CUDA direct kernels share.
#include <oneapi/dnnl/dnnl.hpp>

#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>

#include "ops/conv.h"
#include "ops/defs/common.h"
#include "ops/prepared.h"

namespace encore {
namespace {

const OpDef& conv1d_backward_data_op();
const OpDef& conv1d_backward_filter_op();

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

int infer_conv1d(const OpDef&, std::span<const Tensor> in, const Attrs& attrs, TensorMeta* out) {
  const Tensor &x = in[0], &w = in[1];
  const auto& a = attrs.as<ConvAttrs>();
  defs::require_float("conv1d", x);
  defs::require_same_dtype("conv1d", x, w);
  ENCORE_CHECK(x.dim() == 3, ShapeError, "[conv1d] input must be (batch, steps, channels), got ",
               x.shape().str());
  ENCORE_CHECK(w.dim() == 3, ShapeError,
               "[conv1d] kernel must be (kernel_size, in_channels, filters), got ", w.shape().str());
  check_conv_attrs("conv1d", a, w.shape()[0]);
  ENCORE_CHECK(x.shape()[2] == w.shape()[1], ShapeError, "[conv1d] input ", x.shape().str(), " has ",
               x.shape()[2], " channels but the kernel ", w.shape().str(), " expects ", w.shape()[1]);
  const int64_t len = conv_out_length("conv1d", x.shape()[1], w.shape()[0], a);
  out[0] = defs::meta({x.shape()[0], len, w.shape()[2]}, x.dtype(), x.device());
  return 1;
}

void bw_conv1d(const BackwardCtx& c, Tensor* g) {
  ConvAttrs a = c.attrs.as<ConvAttrs>();
  a.length = c.input_shape(0)[1];
  a.kernel = c.input_shape(1)[0];
  if (c.need(0)) g[0] = call(conv1d_backward_data_op(), {c.grads[0], c.inputs[1]}, a);
  if (c.need(1)) g[1] = call(conv1d_backward_filter_op(), {c.inputs[0], c.grads[0]}, a);
}

// (grad_out (N, Lout, F), w (K, C, F)) -> grad_x (N, length, C)
int infer_conv1d_backward_data(const OpDef&, std::span<const Tensor> in, const Attrs& attrs, TensorMeta* out) {
  const Tensor &gy = in[0], &w = in[1];
  const auto& a = attrs.as<ConvAttrs>();
  defs::require_same_dtype("conv1d_backward_data", gy, w);
  ENCORE_CHECK(w.dim() == 3, ShapeError, "[conv1d_backward_data] kernel must be (kernel_size, "
               "in_channels, filters), got ", w.shape().str());
  check_conv_attrs("conv1d_backward_data", a, w.shape()[0]);
  ENCORE_CHECK(gy.dim() == 3 && gy.shape()[2] == w.shape()[2] && a.length >= 0 &&
                   conv_out_length("conv1d_backward_data", a.length, w.shape()[0], a) == gy.shape()[1],
               ShapeError, "[conv1d_backward_data] gradient ", gy.shape().str(),
               " does not match kernel ", w.shape().str(), " and input length ", a.length);
  out[0] = defs::meta({gy.shape()[0], a.length, w.shape()[1]}, gy.dtype(), gy.device());
  return 1;
}

// (x (N, L, C), grad_out (N, Lout, F)) -> grad_w (kernel, C, F)
int infer_conv1d_backward_filter(const OpDef&, std::span<const Tensor> in, const Attrs& attrs, TensorMeta* out) {
  const Tensor &x = in[0], &gy = in[1];
  const auto& a = attrs.as<ConvAttrs>();
  check_conv_attrs("conv1d_backward_filter", a, a.kernel);
  defs::require_same_dtype("conv1d_backward_filter", x, gy);
  ENCORE_CHECK(x.dim() == 3 && gy.dim() == 3 && x.shape()[0] == gy.shape()[0] &&
                   conv_out_length("conv1d_backward_filter", x.shape()[1], a.kernel, a) == gy.shape()[1],
               ShapeError, "[conv1d_backward_filter] input ", x.shape().str(), " and gradient ",
               gy.shape().str(), " do not match kernel size ", a.kernel);
  out[0] = defs::meta({a.kernel, x.shape()[2], gy.shape()[2]}, x.dtype(), x.device());
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

enum class ConvKind : uint8_t { Forward, BackwardData, BackwardFilter };

struct ConvKey {
  ConvKind kind;
  int64_t n, length, channels, filters, kernel, stride, dilation, pad_l, pad_r;
  bool operator==(const ConvKey&) const = default;
};

struct ConvPrimitive {
  dnnl::primitive primitive;
  dnnl::memory::desc src, weights, dst, scratchpad;
  std::string impl;
};

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

std::shared_ptr<ConvPrimitive> create(const ConvKey& k) {
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  const int64_t out_len = (k.length + k.pad_l + k.pad_r - k.dilation * (k.kernel - 1) - 1) / k.stride + 1;
  auto p = std::make_shared<ConvPrimitive>();
  p->src = dnnl::memory::desc({k.n, k.channels, k.length}, dt::f32, tag::nwc);
  p->weights = dnnl::memory::desc({k.filters, k.channels, k.kernel}, dt::f32, tag::wio);
  p->dst = dnnl::memory::desc({k.n, k.filters, out_len}, dt::f32, tag::nwc);
  const dnnl::memory::dims strides{k.stride}, dilates{k.dilation - 1}, pl{k.pad_l}, pr{k.pad_r};
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const auto alg = dnnl::algorithm::convolution_direct;
  dnnl::convolution_forward::primitive_desc fwd(
      {dnnl::prop_kind::forward_training, alg, p->src, p->weights, p->dst, strides, dilates, pl, pr},
      attr, engine());
  switch (k.kind) {
    case ConvKind::Forward:
      p->primitive = dnnl::convolution_forward(fwd);
      p->scratchpad = fwd.scratchpad_desc();
      p->impl = fwd.impl_info_str();
      break;
    case ConvKind::BackwardData: {
      dnnl::convolution_backward_data::primitive_desc bwd(
          {alg, p->src, p->weights, p->dst, strides, dilates, pl, pr}, attr, engine(), fwd);
      p->primitive = dnnl::convolution_backward_data(bwd);
      p->scratchpad = bwd.scratchpad_desc();
      p->impl = bwd.impl_info_str();
      break;
    }
    case ConvKind::BackwardFilter: {
      dnnl::convolution_backward_weights::primitive_desc bwd(
          {alg, p->src, p->weights, p->dst, strides, dilates, pl, pr}, attr, engine(), fwd);
      p->primitive = dnnl::convolution_backward_weights(bwd);
      p->scratchpad = bwd.scratchpad_desc();
      p->impl = bwd.impl_info_str();
      break;
    }
  }
  return p;
}

std::mutex g_chosen_mutex;
std::map<std::string, std::string>& chosen() {  // key -> implementation, for conv1d_primitives()
  static std::map<std::string, std::string> m;
  return m;
}

std::string describe(const ConvKey& k) {
  static constexpr const char* kKinds[] = {"forward", "backward_data", "backward_filter"};
  return detail::cat(kKinds[static_cast<int>(k.kind)], " N=", k.n, " L=", k.length, " C=", k.channels,
                     " F=", k.filters, " K=", k.kernel, " stride=", k.stride, " dilation=", k.dilation,
                     " pad=(", k.pad_l, ", ", k.pad_r, ")");
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
  return {Kind, r.x->shape[0], r.x->shape[1], r.x->shape[2], r.w->shape[2], r.w->shape[0],
          a.stride, a.dilation, a.pad_l, a.pad_r};
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

template <ConvKind Kind> void kernel(const KernelCtx& c) {
  const Roles r = roles<Kind>(c);
  const auto& a = c.attrs.as<ConvAttrs>();
  if (empty(r)) {
    std::memset(c.out[0].data, 0, c.out[0].numel() * itemsize(c.out[0].dtype));
    return;
  }
  if (c.in[0].dtype == DType::Float64) {
    const ConvGeometry g{r.x->shape[0], r.x->shape[1], r.x->shape[2], r.w->shape[2], r.w->shape[0],
                         r.y->shape[1], a.stride, a.dilation, a.pad_l};
    if constexpr (Kind == ConvKind::Forward)
      conv1d_reference(g, r.x->ptr<const double>(), r.w->ptr<const double>(), r.y->ptr<double>());
    else if constexpr (Kind == ConvKind::BackwardData)
      conv1d_backward_data_reference(g, r.y->ptr<const double>(), r.w->ptr<const double>(), r.x->ptr<double>());
    else
      conv1d_backward_filter_reference(g, r.x->ptr<const double>(), r.y->ptr<const double>(), r.w->ptr<double>());
    return;
  }
  const auto* p = static_cast<const ConvPrimitive*>(c.state);
  dnnl::memory x(p->src, engine(), r.x->data), w(p->weights, engine(), r.w->data),
      y(p->dst, engine(), r.y->data);
  // Scratch memory per thread, not per primitive: threads may run one primitive at once.
  static thread_local dnnl::stream stream(engine());
  static thread_local std::vector<std::byte> scratch;
  if (scratch.size() < p->scratchpad.get_size()) scratch.resize(p->scratchpad.get_size());
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SCRATCHPAD, dnnl::memory(p->scratchpad, engine(), scratch.data())}};
  if constexpr (Kind == ConvKind::Forward) {
    args.insert({{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, y}});
  } else if constexpr (Kind == ConvKind::BackwardData) {
    args.insert({{DNNL_ARG_DIFF_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DIFF_DST, y}});
  } else {
    args.insert({{DNNL_ARG_SRC, x}, {DNNL_ARG_DIFF_WEIGHTS, w}, {DNNL_ARG_DIFF_DST, y}});
  }
  p->primitive.execute(stream, args);
  stream.wait();
}


OpDef& conv1d_op = define_op({
    .name = "conv1d",
    .min_inputs = 2,
    .max_inputs = 2,
    .save = Save::Inputs,
    .contiguous_inputs = true,
    .attrs = &attrs_of<ConvAttrs>,
    .infer = infer_conv1d,
    .backward = bw_conv1d,
    .cpu = {kernel<ConvKind::Forward>, prepare<ConvKind::Forward>},
    .signature = "conv1d(x: Tensor, w: Tensor, stride: int = 1, padding: str | int | tuple[int, int] = 'valid', "
                 "dilation: int = 1) -> Tensor",
    .invoke = [](const CallArgs& a) -> Outputs {
      return {conv1d(a.tensor(0), a.tensor(1), a.integer(2), padding_arg(a, 3), a.integer(4))};
    },
    .doc = "x: (batch, steps, in_channels), w: (kernel_size, in_channels, filters) -> (batch, out_steps, filters).\n"
            "padding: 'valid', 'same', 'causal' (Keras: step t sees no later step), an int or a (left, right) pair",
    .example = {.inputs = {{{2, 9, 3}}, {{3, 3, 4}}}, .args = "stride=2, padding='same', dilation=2"},
});
OpDef& conv1d_backward_data_row = define_op({
    .name = "conv1d_backward_data",
    .min_inputs = 2,
    .max_inputs = 2,
    .contiguous_inputs = true,
    .attrs = &attrs_of<ConvAttrs>,
    .infer = infer_conv1d_backward_data,
    .cpu = {kernel<ConvKind::BackwardData>, prepare<ConvKind::BackwardData>},
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
    .attrs = &attrs_of<ConvAttrs>,
    .infer = infer_conv1d_backward_filter,
    .cpu = {kernel<ConvKind::BackwardFilter>, prepare<ConvKind::BackwardFilter>},
    .example = {.inputs = {{{2, 8, 3}}, {{2, 4, 4}}},
                .call = [](std::span<const Tensor> x) -> Outputs {
                  return {call(conv1d_backward_filter_op(), {x[0], x[1]}, ConvAttrs{2, 1, 1, 1, 8, 3})};
                }},
});
const OpDef& conv1d_backward_data_op() { return conv1d_backward_data_row; }
const OpDef& conv1d_backward_filter_op() { return conv1d_backward_filter_row; }

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
  return call(conv1d_op, {x, w}, ConvAttrs{stride, dilation, pl, pr, 0, 0});
}

std::vector<ConvPrimitiveInfo> conv1d_primitives() {
  std::lock_guard lock(g_chosen_mutex);
  std::vector<ConvPrimitiveInfo> out;
  for (const auto& [key, impl] : chosen()) out.push_back({key, impl});
  return out;
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
