// 1-D convolution, channels-last (x (batch, steps, channels), w (kernel, in, filters), as in
// Keras): rows of the forward op and its two gradient ops, shape inference, the backward
// formula, the CPU kernels and the public function. The CPU runs oneDNN with `nwc` data (our
// layout: activations are never converted) and lets oneDNN choose the weights' layout per
// shape, and with it the implementation: its direct and brgemm convolutions want blocked
// weights, and beat the GEMM-based one that plain `wio` weights allow (measured in
// docs/BENCHMARKS.md). The kernel packs the (K, C, F) weights into that layout before the
// convolution (or unpacks the weight gradient after it), as a BLAS packs its operands: the
// weights are a small fraction of the data a convolution reads. Letting oneDNN choose blocked
// activations too was slower for every benchmark shape (nCw16c: jit/gemm instead of brgconv).
// Creating the primitives is the CPU's per-shape setup cost, done once per shape through the
// dispatcher's cache of prepared states, so an eager call and its replay run the same code.
// oneDNN has no float64 convolution: float64 (gradcheck, references) runs the plain loops
// below, whose index formula (ops/conv.h) the CUDA direct kernels share.
#include <oneapi/dnnl/dnnl.hpp>

#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "ops/conv.h"
#include "ops/epilogue.h"
#include "ops/functors.h"
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

void bw_conv1d_fused(const BackwardCtx& c, Tensor* g) {
  const Tensor gy = activation_backward(c.attrs.as<ConvAttrs>().activation, c.grads[0], c.outputs[0]);
  const Tensor grads[] = {gy};
  bw_conv1d(BackwardCtx{c.inputs, c.outputs, grads, c.input_metas, c.attrs, c.needs}, g);
  if (c.need(2)) g[2] = sum(gy, {0, 1});
}

void bw_conv1d(const BackwardCtx& c, Tensor* g) {
  ConvAttrs a = c.attrs.as<ConvAttrs>();
  a.activation = Activation::Linear;  // conv1d_fused's epilogue is differentiated by its caller
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
  bool bias = false;  // forward only: conv1d_fused's bias and activation (oneDNN post-op)
  Activation activation = Activation::Linear;
  bool operator==(const ConvKey&) const = default;
};

// Keras' activations as oneDNN eltwise post-ops.
void append_activation(dnnl::post_ops& ops, Activation a) {
  using alg = dnnl::algorithm;
  switch (a) {
    case Activation::Relu: ops.append_eltwise(1.0f, alg::eltwise_relu, 0.0f, 0.0f); break;
    case Activation::Tanh: ops.append_eltwise(1.0f, alg::eltwise_tanh, 0.0f, 0.0f); break;
    case Activation::Sigmoid: ops.append_eltwise(1.0f, alg::eltwise_logistic, 0.0f, 0.0f); break;
    case Activation::HardSigmoid:  // clip(0.2 x + 0.5, 0, 1)
      ops.append_eltwise(1.0f, alg::eltwise_linear, 0.2f, 0.5f);
      ops.append_eltwise(1.0f, alg::eltwise_clip, 0.0f, 1.0f);
      break;
    case Activation::Linear: break;
    case Activation::Gelu:
    case Activation::Softmax: break;  // refused by infer_conv1d_fused
  }
}

struct ConvPrimitive {
  dnnl::primitive primitive;
  dnnl::memory::desc src, weights, dst, scratchpad;
  // Between our `wio` weights and the implementation's layout, when they differ: wio -> its
  // layout before a forward or backward-data convolution, its layout -> wio after a
  // backward-filter one.
  std::optional<dnnl::reorder> weights_reorder;
  dnnl::memory::desc user_weights;
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
  p->user_weights = dnnl::memory::desc({k.filters, k.channels, k.kernel}, dt::f32, tag::wio);
  p->weights = dnnl::memory::desc({k.filters, k.channels, k.kernel}, dt::f32, tag::any);
  p->dst = dnnl::memory::desc({k.n, k.filters, out_len}, dt::f32, tag::nwc);
  const dnnl::memory::dims strides{k.stride}, dilates{k.dilation - 1}, pl{k.pad_l}, pr{k.pad_r};
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const auto alg = dnnl::algorithm::convolution_direct;
  dnnl::primitive_attr fwd_attr = attr;
  if (k.activation != Activation::Linear) {
    dnnl::post_ops ops;
    append_activation(ops, k.activation);
    fwd_attr.set_post_ops(ops);
  }
  const dnnl::memory::desc bias({k.filters}, dt::f32, tag::a);
  dnnl::convolution_forward::primitive_desc fwd =
      k.bias ? dnnl::convolution_forward::primitive_desc(
                   {dnnl::prop_kind::forward_training, alg, p->src, p->weights, bias, p->dst, strides, dilates, pl, pr},
                   fwd_attr, engine())
             : dnnl::convolution_forward::primitive_desc(
                   {dnnl::prop_kind::forward_training, alg, p->src, p->weights, p->dst, strides, dilates, pl, pr},
                   fwd_attr, engine());
  // The primitive, its scratchpad, the layout it wants the weights in and its name.
  const auto adopt = [&p](dnnl::primitive primitive, const auto& pd, const dnnl::memory::desc& weights) {
    p->primitive = std::move(primitive);
    p->scratchpad = pd.scratchpad_desc();
    p->weights = weights;
    p->impl = pd.impl_info_str();
  };
  switch (k.kind) {
    case ConvKind::Forward: adopt(dnnl::convolution_forward(fwd), fwd, fwd.weights_desc()); break;
    case ConvKind::BackwardData: {
      const dnnl::convolution_backward_data::primitive_desc bwd(
          {alg, p->src, p->weights, p->dst, strides, dilates, pl, pr}, attr, engine(), fwd);
      adopt(dnnl::convolution_backward_data(bwd), bwd, bwd.weights_desc());
      break;
    }
    case ConvKind::BackwardFilter: {
      const dnnl::convolution_backward_weights::primitive_desc bwd(
          {alg, p->src, p->weights, p->dst, strides, dilates, pl, pr}, attr, engine(), fwd);
      adopt(dnnl::convolution_backward_weights(bwd), bwd, bwd.diff_weights_desc());
      break;
    }
  }
  if (p->weights != p->user_weights) {
    const bool unpack = k.kind == ConvKind::BackwardFilter;
    p->weights_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(
        engine(), unpack ? p->weights : p->user_weights, engine(), unpack ? p->user_weights : p->weights));
    p->impl += " (weights in its layout)";
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
                     " pad=(", k.pad_l, ", ", k.pad_r, ")", k.bias ? " +bias" : "",
                     k.activation == Activation::Linear ? "" : detail::cat(" +", name(k.activation)));
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
          a.stride, a.dilation, a.pad_l, a.pad_r, Kind == ConvKind::Forward && c.in.size() == 3,
          Kind == ConvKind::Forward ? a.activation : Activation::Linear};
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
  const auto* p = static_cast<const ConvPrimitive*>(c.state);
  // Scratch memory per thread, not per primitive: threads may run one primitive at once. It
  // holds the primitive's scratchpad and the weights in its layout, each 64-byte aligned.
  static thread_local dnnl::stream stream(engine());
  static thread_local std::vector<std::byte> scratch;
  constexpr size_t kAlign = 64;
  const size_t pad_bytes = (p->scratchpad.get_size() + kAlign - 1) / kAlign * kAlign;
  const size_t packed_bytes = p->weights_reorder ? p->weights.get_size() : 0;
  if (scratch.size() < pad_bytes + packed_bytes + kAlign) scratch.resize(pad_bytes + packed_bytes + kAlign);
  std::byte* base = scratch.data() + (kAlign - reinterpret_cast<uintptr_t>(scratch.data()) % kAlign) % kAlign;
  dnnl::memory x(p->src, engine(), r.x->data), y(p->dst, engine(), r.y->data),
      w_user(p->user_weights, engine(), r.w->data);
  dnnl::memory w = p->weights_reorder ? dnnl::memory(p->weights, engine(), base + pad_bytes) : w_user;
  if (p->weights_reorder && Kind != ConvKind::BackwardFilter) p->weights_reorder->execute(stream, w_user, w);
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SCRATCHPAD, dnnl::memory(p->scratchpad, engine(), base)}};
  if constexpr (Kind == ConvKind::Forward) {
    args.insert({{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, y}});
    if (c.in.size() == 3)
      args.insert({DNNL_ARG_BIAS, dnnl::memory(dnnl::memory::desc({r.w->shape[2]}, dnnl::memory::data_type::f32,
                                                                  dnnl::memory::format_tag::a),
                                               engine(), c.in[2].data)});
  } else if constexpr (Kind == ConvKind::BackwardData) {
    args.insert({{DNNL_ARG_DIFF_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DIFF_DST, y}});
  } else {
    args.insert({{DNNL_ARG_SRC, x}, {DNNL_ARG_DIFF_WEIGHTS, w}, {DNNL_ARG_DIFF_DST, y}});
  }
  p->primitive.execute(stream, args);
  if (p->weights_reorder && Kind == ConvKind::BackwardFilter) p->weights_reorder->execute(stream, w, w_user);
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
OpDef& conv1d_fused_op = define_op({
    .name = "conv1d_fused",
    .min_inputs = 3,
    .max_inputs = 3,
    .save = Save::Inputs | Save::Outputs,
    .contiguous_inputs = true,
    .attrs = &attrs_of<ConvAttrs>,
    .infer = infer_conv1d_fused,
    .backward = bw_conv1d_fused,
    .cpu = {kernel<ConvKind::Forward>, prepare<ConvKind::Forward>},
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
  return call(conv1d_fused_op, {x, w, b}, ConvAttrs{stride, dilation, pl, pr, 0, 0, activation});
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
