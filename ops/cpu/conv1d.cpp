// conv1d on the CPU through oneDNN, channels-last (`nwc` data, `wio` weights — our
// (kernel, in, out) layout), so no layout conversion is ever inserted. Primitive creation is
// the CPU's per-shape setup cost: primitives are cached per shape (counted in the ledger as
// autotunes / autotune hits), and a Plan resolves its primitive once, at build time.
// oneDNN has no float64 convolution; float64 (gradcheck, references) uses plain loops.
#include <oneapi/dnnl/dnnl.hpp>

#include <cstring>
#include <mutex>
#include <unordered_map>

#include "core/ledger.h"
#include "ops/cpu/kernels.h"
#include "ops/cpu/conv1d.h"

namespace encore::cpu {
namespace {

enum class ConvKind : uint8_t { Forward, BackwardData, BackwardFilter };

struct ConvKey {
  ConvKind kind;
  int64_t n, length, channels, filters, kernel, stride, dilation, pad_l, pad_r;
  bool operator==(const ConvKey&) const = default;
};

struct ConvKeyHash {
  size_t operator()(const ConvKey& k) const {
    size_t h = static_cast<size_t>(k.kind);
    for (int64_t v : {k.n, k.length, k.channels, k.filters, k.kernel, k.stride, k.dilation, k.pad_l, k.pad_r})
      h = h * 1000003u ^ static_cast<size_t>(v);
    return h;
  }
};

struct ConvPrimitive {
  dnnl::primitive primitive;
  dnnl::memory::desc src, weights, dst;
  dnnl::memory scratchpad;
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
  dnnl::memory::desc scratch;
  switch (k.kind) {
    case ConvKind::Forward:
      p->primitive = dnnl::convolution_forward(fwd);
      scratch = fwd.scratchpad_desc();
      p->impl = fwd.impl_info_str();
      break;
    case ConvKind::BackwardData: {
      dnnl::convolution_backward_data::primitive_desc bwd(
          {alg, p->src, p->weights, p->dst, strides, dilates, pl, pr}, attr, engine(), fwd);
      p->primitive = dnnl::convolution_backward_data(bwd);
      scratch = bwd.scratchpad_desc();
      p->impl = bwd.impl_info_str();
      break;
    }
    case ConvKind::BackwardFilter: {
      dnnl::convolution_backward_weights::primitive_desc bwd(
          {alg, p->src, p->weights, p->dst, strides, dilates, pl, pr}, attr, engine(), fwd);
      p->primitive = dnnl::convolution_backward_weights(bwd);
      scratch = bwd.scratchpad_desc();
      p->impl = bwd.impl_info_str();
      break;
    }
  }
  p->scratchpad = dnnl::memory(scratch, engine());
  return p;
}

std::mutex g_cache_mutex;
std::unordered_map<ConvKey, std::shared_ptr<ConvPrimitive>, ConvKeyHash> g_cache;

std::shared_ptr<ConvPrimitive> lookup(const ConvKey& key) {
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  auto it = g_cache.find(key);
  Ledger& ledger = Ledger::global();
  if (it != g_cache.end()) {
    ledger.add(Counter::AutotuneHits, 1);
    return it->second;
  }
  ScopedTimer timer(Counter::AutotuneNs, "autotune", "conv1d primitive");
  ledger.add(Counter::Autotunes, 1);
  try {
    return g_cache.emplace(key, create(key)).first->second;
  } catch (const dnnl::error& e) {
    throw BackendError(std::string("[conv1d] oneDNN primitive creation failed: ") + e.what());
  }
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
  const auto& a = std::get<ConvAttrs>(c.attrs);
  const Roles r = roles<Kind>(c);
  return {Kind, r.x->shape[0], r.x->shape[1], r.x->shape[2], r.w->shape[2], r.w->shape[0],
          a.stride, a.dilation, a.pad_l, a.pad_r};
}

// An empty batch, sequence, channel or filter axis: oneDNN has no primitive for it, and the
// result is empty or a sum over nothing (zeros).
bool empty(const Roles& r) { return r.x->numel() == 0 || r.w->numel() == 0 || r.y->numel() == 0; }

template <ConvKind Kind> std::shared_ptr<void> prepare(const KernelCtx& c) {
  if (c.in[0].dtype != DType::Float32 || empty(roles<Kind>(c))) return nullptr;
  return lookup(key_of<Kind>(c));
}

template <ConvKind Kind> void kernel(const KernelCtx& c) {
  const Roles r = roles<Kind>(c);
  const auto& a = std::get<ConvAttrs>(c.attrs);
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
  std::shared_ptr<ConvPrimitive> owned;
  auto* p = static_cast<ConvPrimitive*>(c.state);
  if (!p) {
    owned = lookup(key_of<Kind>(c));
    p = owned.get();
  }
  dnnl::memory x(p->src, engine(), r.x->data), w(p->weights, engine(), r.w->data),
      y(p->dst, engine(), r.y->data);
  static thread_local dnnl::stream stream(engine());
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SCRATCHPAD, p->scratchpad}};
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

}  // namespace

template <class T>
void conv1d_reference(const ConvGeometry& g, const T* x, const T* w, T* y) {
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t t = 0; t < g.out_length; ++t) {
      T* yr = y + (n * g.out_length + t) * g.filters;
      for (int64_t f = 0; f < g.filters; ++f) yr[f] = T(0);
      for (int64_t k = 0; k < g.kernel; ++k) {
        const int64_t i = t * g.stride + k * g.dilation - g.pad_l;
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
        const int64_t i = t * g.stride + k * g.dilation - g.pad_l;
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
        const int64_t i = t * g.stride + k * g.dilation - g.pad_l;
        if (i < 0 || i >= g.length) continue;
        for (int64_t ch = 0; ch < g.channels; ++ch) {
          const T xv = x[(n * g.length + i) * g.channels + ch];
          T* wr = gw + (k * g.channels + ch) * g.filters;
          for (int64_t f = 0; f < g.filters; ++f) wr[f] += xv * gr[f];
        }
      }
    }
}

template void conv1d_reference<double>(const ConvGeometry&, const double*, const double*, double*);
template void conv1d_backward_data_reference<double>(const ConvGeometry&, const double*, const double*, double*);
template void conv1d_backward_filter_reference<double>(const ConvGeometry&, const double*, const double*, double*);

std::vector<ConvPrimitiveInfo> conv1d_primitives() {
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  std::vector<ConvPrimitiveInfo> out;
  for (const auto& [k, p] : g_cache) {
    static constexpr const char* kKinds[] = {"forward", "backward_data", "backward_filter"};
    out.push_back({detail::cat(kKinds[static_cast<int>(k.kind)], " N=", k.n, " L=", k.length,
                               " C=", k.channels, " F=", k.filters, " K=", k.kernel,
                               " stride=", k.stride, " dilation=", k.dilation, " pad=(", k.pad_l,
                               ", ", k.pad_r, ")"),
                   p->impl});
  }
  return out;
}

void clear_conv1d_primitives() {
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  g_cache.clear();
  // oneDNN keeps its own cache of primitives: without flushing it, a shape seen before would
  // be "created" again at no cost and the setup would look free.
  const int capacity = dnnl::get_primitive_cache_capacity();
  dnnl::set_primitive_cache_capacity(0);
  dnnl::set_primitive_cache_capacity(capacity);
}

void register_conv1d() {
  set_kernel(OpId::conv1d, kernel<ConvKind::Forward>, prepare<ConvKind::Forward>);
  set_kernel(OpId::conv1d_backward_data, kernel<ConvKind::BackwardData>, prepare<ConvKind::BackwardData>);
  set_kernel(OpId::conv1d_backward_filter, kernel<ConvKind::BackwardFilter>, prepare<ConvKind::BackwardFilter>);
}

}  // namespace encore::cpu
