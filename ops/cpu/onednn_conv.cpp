// conv1d's float32 CPU kernels: oneDNN's convolutions (the rows, shape inference and backward
// formulas are in ops/defs/conv1d.cpp). oneDNN runs with `nwc` data (our layout: activations are
// never converted) and chooses the weights' layout per shape, and with it the implementation: its
// direct and brgemm convolutions want blocked weights, and beat the GEMM-based one that plain
// `wio` weights allow (measured in docs/BENCHMARKS.md). The kernel packs the (K, C, F) weights
// into that layout before the convolution (or unpacks the weight gradient after it), as a BLAS
// packs its operands: the weights are a small fraction of the data a convolution reads. With
// set_conv1d_layout(Blocked) the activations come in the blocks oneDNN prefers
// (onednn_preferred_blocks), converted by graph nodes.
// Which of the implementations offered for a shape runs (oneDNN's, and for the gradients
// encore's tap-block ones, ops/cpu/conv_taps.h) follows the autotune policy (ops/autotune.h:
// a rule, or the fastest of each timed once), and the choice is kept in the autotune store,
// which save/load carry to another process. An implementation known to compute a problem
// wrongly is never offered (known_wrong).
// Creating the primitives is the CPU's per-shape setup cost, done once per shape through the
// dispatcher's cache of prepared states, so an eager call and its replay run the same code.
// Long: the three directions' setup, choice and call share ConvPrimitive and the oneDNN
// descriptors built here; split, each part would reach into the others' internals.
#include "ops/cpu/onednn_conv.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <unordered_map>

#include "core/ledger.h"
#include "ops/autotune.h"
#include "ops/conv.h"
#include "ops/cpu/conv_loops.h"
#include "ops/cpu/conv_taps.h"
#include "ops/cpu/onednn.h"
#include "ops/epilogue.h"
#include "ops/prepared.h"

namespace encore::cpu {
namespace {

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
  // encore's own implementations of the gradients (ops/cpu/conv_taps.h): the tap-block GEMMs
  // (no primitive), or the input gradient as `primitive`, a forward convolution of the
  // time-reversed gradient (its operands reversed_gy and reversed_gx, its weights read from
  // ours through weights_view).
  enum class Own : uint8_t { None, TapGemm, TapForward } own = Own::None;
  ConvProblem problem{};
  dnnl::memory::desc reversed_gy, reversed_gx, weights_view;
};

// The names the autotune store and show_config give encore's implementations.
constexpr const char* kTapGemm = "encore:tap_gemm";
constexpr const char* kTapForward = "encore:tap_forward";

void run_tap_forward(const ConvPrimitive& p, const float* gy, const float* w, float* gx);

constexpr const char* kOps[] = {"conv1d", "conv1d_backward_data", "conv1d_backward_filter"};

// The problem without its kind: the autotune store's key (the op names the kind).
std::string shape_key(const ConvProblem& k) {
  return detail::cat(
      "N=", k.n, " L=", k.length, " C=", k.channels, " F=", k.filters, " K=", k.kernel,
      " stride=", k.stride, " dilation=", k.dilation, " pad=(", k.pad_l, ", ", k.pad_r, ")",
      k.bias ? " +bias" : "",
      k.activation == Activation::Linear ? "" : detail::cat(" +", name(k.activation)),
      k.x_block || k.y_block ? detail::cat(" blocked=(", k.x_block, ", ", k.y_block, ")") : "");
}

std::string describe(const ConvProblem& k) {
  static constexpr const char* kKinds[] = {"forward", "backward_data", "backward_filter"};
  return detail::cat(kKinds[static_cast<int>(k.kind)], " ", shape_key(k));
}

// A reorder from `ours` to the implementation's `its` (or back, `to_ours`), none when equal.
std::optional<dnnl::reorder> reorder_between(const dnnl::memory::desc& ours,
                                             const dnnl::memory::desc& its, bool to_ours) {
  if (ours == its) return std::nullopt;
  return dnnl::reorder(dnnl::reorder::primitive_desc(onednn_engine(), to_ours ? its : ours,
                                                     onednn_engine(), to_ours ? ours : its));
}

template <class Pd>
void adopt(ConvPrimitive& p, ConvKind kind, dnnl::primitive primitive, const Pd& pd,
           const dnnl::memory::desc& weights) {
  p.primitive = std::move(primitive);
  p.scratchpad = pd.scratchpad_desc();
  p.weights = weights;
  p.impl = pd.impl_info_str();
  p.weights_reorder = reorder_between(p.user_weights, p.weights, kind == ConvKind::BackwardFilter);
}

// One call: the weights packed into the implementation's layout (unpacked after a
// backward-filter convolution), then the convolution. x, w, y are the (x, w, y) roles of
// roles() below; bias only for conv1d_fused.
void run(const ConvPrimitive& p, ConvKind kind, void* x_data, void* w_data, void* y_data,
         void* bias) {
  if (p.own == ConvPrimitive::Own::TapForward) {
    run_tap_forward(p, static_cast<const float*>(y_data), static_cast<const float*>(w_data),
                    static_cast<float*>(x_data));
    return;
  }
  if (p.own == ConvPrimitive::Own::TapGemm) {
    if (kind == ConvKind::BackwardFilter)
      tap_gemm_backward_filter(p.problem, static_cast<const float*>(x_data),
                               static_cast<const float*>(y_data), static_cast<float*>(w_data));
    else
      tap_gemm_backward_data(p.problem, static_cast<const float*>(y_data),
                             static_cast<const float*>(w_data), static_cast<float*>(x_data));
    return;
  }
  // Scratch memory per thread, not per primitive: threads may run one primitive at once. It
  // holds the primitive's scratchpad, then the weights in its layout where it differs from
  // ours, each 64-byte aligned.
  constexpr size_t kAlign = 64;
  const size_t pad_bytes = (p.scratchpad.get_size() + kAlign - 1) / kAlign * kAlign;
  const size_t w_bytes = p.weights_reorder ? p.weights.get_size() : 0;
  std::byte* base = thread_scratch(0, pad_bytes + w_bytes);
  dnnl::stream& stream = onednn_stream();
  dnnl::memory x(p.src, onednn_engine(), x_data), y(p.dst, onednn_engine(), y_data),
      w_user(p.user_weights, onednn_engine(), w_data);
  dnnl::memory w =
      p.weights_reorder ? dnnl::memory(p.weights, onednn_engine(), base + pad_bytes) : w_user;
  if (p.weights_reorder && kind != ConvKind::BackwardFilter)
    p.weights_reorder->execute(stream, w_user, w);
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SCRATCHPAD, dnnl::memory(p.scratchpad, onednn_engine(), base)}};
  switch (kind) {
    case ConvKind::Forward:
      args.insert({{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, y}});
      if (bias) args.insert({DNNL_ARG_BIAS, dnnl::memory(p.bias, onednn_engine(), bias)});
      break;
    case ConvKind::BackwardData:
      args.insert({{DNNL_ARG_DIFF_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DIFF_DST, y}});
      break;
    case ConvKind::BackwardFilter:
      args.insert({{DNNL_ARG_SRC, x}, {DNNL_ARG_DIFF_WEIGHTS, w}, {DNNL_ARG_DIFF_DST, y}});
      break;
  }
  p.primitive.execute(stream, args);
  if (p.weights_reorder && kind == ConvKind::BackwardFilter)
    p.weights_reorder->execute(stream, w, w_user);
  stream.wait();
}

// A call of `p` on scratch operands in ms: the fastest of three after an untimed one (JIT code
// and pages warm); one call alone is at the mercy of whatever else the machine does.
double time_call(const ConvPrimitive& p, ConvKind kind) {
  std::vector<float> x(p.src.get_size() / sizeof(float), 0.5f),
      w(p.user_weights.get_size() / sizeof(float), 0.5f), y(p.dst.get_size() / sizeof(float), 0.5f),
      b(p.bias.get_size() / sizeof(float), 0.5f);
  run(p, kind, x.data(), w.data(), y.data(), b.data());
  double best = INFINITY;
  for (int i = 0; i < 3; ++i) {
    const int64_t start = now_ns();
    run(p, kind, x.data(), w.data(), y.data(), b.data());
    best = std::min(best, (now_ns() - start) / 1e6);
  }
  return best;
}

// Whether oneDNN's implementation `impl` computes problem `k` wrongly, so that it must never run
// it. Two weight-gradient bugs are known, in oneDNN 2.6 and still in its current sources
// (docs/ARCHITECTURE.md, "Two oneDNN bugs kept away"; tests/cpp/test_fastpath_conv.cpp):
//  - its AVX-512 direct convolution (jit:avx512_core, jit_avx512_common_conv_bwd_weights_kernel_f32
//    ::compute_oh_step_common) walks more than 28 output steps in blocks of ur_w (28, or 14 once
//    it moves steps into the tail block) and hands the next block a left padding of
//    `l_pad - ur_w`, output steps subtracted from input steps: with a stride above 1 and a left
//    padding above ur_w, every later block reads its input shifted, the gradient off by O(1)
//    (126% for x (6, 70, 39), w (8, 39, 2), stride 3, padding (23, 23), dilation 4). Left out
//    where it can strike: stride > 1, over 28 output steps, left padding > 14 (the smallest ur_w);
//  - its 1x1 convolutions (jit_1x1:avx512_core, jit_1x1:avx2) with a stride above 1 first gather
//    the strided input steps into a workspace, placed at `step * ic_block` although channels-last
//    steps are `ic` apart: with fewer channels than a block (16, or 8) the gather writes past the
//    scratchpad the primitive booked (up to 1,104 bytes past it, into the weights buffer that
//    follows in our scratch memory), and the gradient comes out wrong. Left out for a stride
//    above 1, channels-last input and fewer than 16 channels (oneDNN issue 6035).
bool known_wrong(const ConvProblem& k, const std::string& impl) {
  if (k.kind != ConvKind::BackwardFilter || k.stride == 1) return false;
  if (impl.starts_with("jit:avx512")) return k.out_length() > 28 && k.pad_l > 14;
  if (impl.starts_with("jit_1x1:")) return k.x_block == 0 && k.channels < 16;
  return false;
}

// Where offered() lists encore's implementations: after oneDNN's.
constexpr size_t kTapGemmPosition = SIZE_MAX, kTapForwardPosition = SIZE_MAX - 1;

// The implementations oneDNN offers for the problem (`make_pd()` makes its primitive descriptor
// at the first, its preference; next_impl() walks the others), each with its position, less
// those known to compute it wrongly; then encore's own where they apply.
template <class MakePd>
std::vector<std::pair<size_t, std::string>> offered(const ConvProblem& k, MakePd make_pd) {
  std::vector<std::pair<size_t, std::string>> out;
  auto pd = make_pd();
  for (size_t i = 0;; ++i) {
    if (std::string name = pd.impl_info_str(); !known_wrong(k, name))
      out.emplace_back(i, std::move(name));
    if (!pd.next_impl()) break;
  }
  if (tap_gemm_applies(k)) {
    out.emplace_back(kTapGemmPosition, kTapGemm);
    if (k.kind == ConvKind::BackwardData) out.emplace_back(kTapForwardPosition, kTapForward);
  }
  ENCORE_CHECK(!out.empty(), BackendError, "[conv1d] oneDNN offers no usable implementation for ",
               describe(k));
  return out;
}

void adopt_tap_forward(ConvPrimitive& p, const ConvProblem& k);

void adopt_tap_gemm(ConvPrimitive& p, const ConvProblem& k) {
  p.own = ConvPrimitive::Own::TapGemm;
  p.primitive = {};
  p.weights_reorder.reset();
  p.weights = p.user_weights;
  p.scratchpad = dnnl::memory::desc();
  p.impl = kTapGemm;
  p.problem = k;
}

// The scratch memory a call of p takes besides its operands.
size_t workspace_bytes(const ConvPrimitive& p) {
  switch (p.own) {
    case ConvPrimitive::Own::TapGemm:
      return tap_gemm_scratch_bytes(p.problem);
    case ConvPrimitive::Own::TapForward:
      return p.scratchpad.get_size() + p.reversed_gy.get_size() + p.reversed_gx.get_size();
    case ConvPrimitive::Own::None:
      break;
  }
  return p.scratchpad.get_size();
}

bool gemm_based(const std::string& impl) {
  return impl.find("gemm") != std::string::npos && impl.find("brg") == std::string::npos &&
         !impl.starts_with("encore:");
}

// The pick of the policies that time nothing (index into impls): off takes oneDNN's GEMM-based
// implementation where offered; heuristic oneDNN's first, or encore's own where that first is
// the GEMM-based one. For an input gradient, the reversed forward where it was faster on every
// benchmark layer (docs/BENCHMARKS.md): 64 channels or more (oneDNN's brgemm forward is at its
// best there), or an output at most twice its tap blocks long, where the per-block GEMMs are
// short (the 400-tap layers: 1.3-1.4x); the per-block GEMMs for few channels and long outputs
// (small@1400's shape: 2x faster than the forward).
size_t rule_pick(autotune::Policy policy, const ConvProblem& k,
                 const std::vector<std::pair<size_t, std::string>>& impls) {
  const auto find = [&](auto pred) {
    return static_cast<size_t>(
        std::find_if(impls.begin(), impls.end(), [&](const auto& i) { return pred(i.second); }) -
        impls.begin());
  };
  if (policy == autotune::Policy::Off) {
    const size_t gemm = find(gemm_based);
    return gemm < impls.size() ? gemm : 0;
  }
  const bool forward = k.channels >= 64 || k.out_length() <= 2 * (k.kernel / k.stride);
  const char* own = k.kind == ConvKind::BackwardData && forward ? kTapForward : kTapGemm;
  const size_t mine = find([&](const std::string& n) { return n == own; });
  return mine < impls.size() && gemm_based(impls[0].second) ? mine : 0;
}

// Which of the implementations offered for this problem (offered()) runs it: a choice stored
// earlier (this process, or a loaded file) if still offered, else the policy's — off and
// heuristic by rule_pick (encore's own where oneDNN would run its GEMM-based backward: the same
// products without its im2col copy, faster on every benchmark shape, docs/BENCHMARKS.md);
// exhaustive: the fastest, each timed on scratch operands (weights packing included). The choice
// goes to the autotune store.
template <class Primitive, class MakePd, class LayoutsOf>
void choose(const ConvProblem& k, ConvPrimitive& p, MakePd make_pd, LayoutsOf layouts_of) {
  // oneDNN's primitive cache (v2.6) can hand back the primitive of another implementation of
  // the same problem, which would time one implementation under every name: off while
  // choosing (the dispatcher's cache keeps ours per shape; it prepares one shape at a time).
  struct NoPrimitiveCache {
    const int capacity = dnnl::get_primitive_cache_capacity();
    NoPrimitiveCache() { dnnl::set_primitive_cache_capacity(0); }
    ~NoPrimitiveCache() { dnnl::set_primitive_cache_capacity(capacity); }
  } no_cache;
  const std::vector<std::pair<size_t, std::string>> impls = offered(k, make_pd);
  const auto take = [&](size_t i) {
    p.own = ConvPrimitive::Own::None;
    if (impls[i].first == kTapForwardPosition) return adopt_tap_forward(p, k);
    if (impls[i].first == kTapGemmPosition) return adopt_tap_gemm(p, k);
    auto pd = make_pd();
    for (size_t j = 0; j < impls[i].first; ++j) pd.next_impl();
    adopt(p, k.kind, Primitive(pd), pd, layouts_of(pd));
  };
  const char* op = kOps[static_cast<int>(k.kind)];
  const std::string key = shape_key(k) + " float32 cpu";
  if (const auto e = autotune::detail::find(op, key)) {
    const auto stored = std::find_if(impls.begin(), impls.end(),
                                     [&](const auto& i) { return i.second == e->algorithm; });
    if (stored != impls.end()) {
      take(static_cast<size_t>(stored - impls.begin()));
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
  if (policy != autotune::Policy::Exhaustive) {
    pick = rule_pick(policy, k, impls);
  } else {
    for (size_t i = 0; i < impls.size(); ++i) {
      // oneDNN's reference implementations are its correctness baseline, far slower (often 100x)
      // than any other: timing them would only make the search long.
      if (impls[i].second.starts_with("ref") && i > 0) continue;
      take(i);
      const double ms = time_call(p, k.kind);
      e.timings.push_back({impls[i].second, ms});
      if (e.time_ms < 0 || ms < e.time_ms) {
        e.time_ms = ms;
        pick = i;
      }
    }
  }
  take(pick);
  e.algorithm = impls[pick].second;
  e.workspace_bytes = workspace_bytes(p);
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

dnnl::primitive_attr forward_attr(const ConvProblem& k) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (k.activation != Activation::Linear) attr.set_post_ops(activation_post_ops(k.activation));
  return attr;
}

dnnl::convolution_forward::desc forward_desc(const ConvProblem& k, const dnnl::memory::desc& src,
                                             const dnnl::memory::desc& dst) {
  using Fwd = dnnl::convolution_forward;
  const dnnl::memory::desc any_weights({k.filters, k.channels, k.kernel},
                                       dnnl::memory::data_type::f32, dnnl::memory::format_tag::any);
  const dnnl::memory::dims strides{k.stride}, dilates{k.dilation - 1}, pl{k.pad_l}, pr{k.pad_r};
  const auto prop = dnnl::prop_kind::forward_training;
  const auto alg = dnnl::algorithm::convolution_direct;
  if (!k.bias) return Fwd::desc(prop, alg, src, any_weights, dst, strides, dilates, pl, pr);
  const dnnl::memory::desc bias({k.filters}, dnnl::memory::data_type::f32,
                                dnnl::memory::format_tag::a);
  return Fwd::desc(prop, alg, src, any_weights, bias, dst, strides, dilates, pl, pr);
}

// encore:tap_forward for backward-data problem k: oneDNN's preferred forward convolution of
// tap_forward_problem(k), its weights packed from k's through a strided view.
void adopt_tap_forward(ConvPrimitive& p, const ConvProblem& k) {
  const ConvProblem f = tap_forward_problem(k);
  p.reversed_gy = activation_desc(f.n, f.channels, f.length, 0);
  p.reversed_gx = activation_desc(f.n, f.filters, f.out_length(), 0);
  const dnnl::convolution_forward::primitive_desc pd(forward_desc(f, p.reversed_gy, p.reversed_gx),
                                                     forward_attr(f), onednn_engine());
  p.primitive = dnnl::convolution_forward(pd);
  p.scratchpad = pd.scratchpad_desc();
  p.weights = pd.weights_desc();
  const std::array<int64_t, 3> strides = tap_forward_weights_strides(k);
  p.weights_view =
      dnnl::memory::desc({f.filters, f.channels, f.kernel}, dnnl::memory::data_type::f32,
                         dnnl::memory::dims(strides.begin(), strides.end()));
  p.weights_reorder = reorder_between(p.weights_view, p.weights, false);
  p.impl = kTapForward;
  p.problem = k;
  p.own = ConvPrimitive::Own::TapForward;
}

void run_tap_forward(const ConvPrimitive& p, const float* gy, const float* w, float* gx) {
  // Scratch: the primitive's scratchpad, the packed weights, the reversed gy, the reversed
  // padded input gradient, each 64-byte aligned.
  const auto aligned = [](size_t n) { return (n + 63) / 64 * 64; };
  const size_t pad = aligned(p.scratchpad.get_size()),
               packed = p.weights_reorder ? aligned(p.weights.get_size()) : 0,
               reversed = aligned(p.reversed_gy.get_size());
  std::byte* base = thread_scratch(0, pad + packed + reversed + p.reversed_gx.get_size());
  const ConvProblem& k = p.problem;
  auto* gy_reversed = reinterpret_cast<float*>(base + pad + packed);
  auto* out = reinterpret_cast<float*>(base + pad + packed + reversed);
  reverse_steps(gy, gy_reversed, k.n, k.out_length(), k.filters);
  dnnl::stream& stream = onednn_stream();
  const dnnl::engine& engine = onednn_engine();
  dnnl::memory view(p.weights_view, engine, const_cast<float*>(w));
  dnnl::memory weights = p.weights_reorder ? dnnl::memory(p.weights, engine, base + pad) : view;
  if (p.weights_reorder) p.weights_reorder->execute(stream, view, weights);
  p.primitive.execute(stream, {{DNNL_ARG_SRC, dnnl::memory(p.reversed_gy, engine, gy_reversed)},
                               {DNNL_ARG_WEIGHTS, weights},
                               {DNNL_ARG_DST, dnnl::memory(p.reversed_gx, engine, out)},
                               {DNNL_ARG_SCRATCHPAD, dnnl::memory(p.scratchpad, engine, base)}});
  stream.wait();
  tap_forward_gather(k, out, gx);
}

// The x and y blocks that the implementation oneDNN prefers for k's kind (the first offered())
// wants, k.x_block and k.y_block ignored, asked once per problem. A backward pass may prefer
// other layouts than its forward (fixed to the forward's, oneDNN may offer only its reference
// implementation).
std::pair<int64_t, int64_t> preferred_blocks(const ConvProblem& k) {
  static std::mutex mutex;
  static std::map<std::string, std::pair<int64_t, int64_t>> known;
  const std::string key = describe(k);
  std::lock_guard lock(mutex);
  if (const auto it = known.find(key); it != known.end()) return it->second;
  if (known.size() >= 4096) known.erase(known.begin());
  const dnnl::memory::desc src = activation_desc(k.n, k.channels, k.length, -1),
                           dst = activation_desc(k.n, k.filters, k.out_length(), -1);
  const dnnl::convolution_forward::primitive_desc fwd(forward_desc(k, src, dst), forward_attr(k),
                                                      onednn_engine());
  std::pair<int64_t, int64_t> blocks{block_of(fwd.src_desc()), block_of(fwd.dst_desc())};
  const dnnl::memory::desc any_weights({k.filters, k.channels, k.kernel},
                                       dnnl::memory::data_type::f32, dnnl::memory::format_tag::any);
  const dnnl::memory::dims strides{k.stride}, dilates{k.dilation - 1}, pl{k.pad_l}, pr{k.pad_r};
  const auto alg = dnnl::algorithm::convolution_direct;
  // The operation descriptor outlives its primitive descriptor, whose next_impl() reads it.
  const auto first_offered = [&](auto& pd) {
    while (known_wrong(k, pd.impl_info_str()) && pd.next_impl()) {
    }
  };
  if (k.kind == ConvKind::BackwardData) {
    using Bwd = dnnl::convolution_backward_data;
    const Bwd::desc desc(alg, src, any_weights, dst, strides, dilates, pl, pr);
    Bwd::primitive_desc pd(desc, onednn_engine(), fwd);
    first_offered(pd);
    blocks = {block_of(pd.diff_src_desc()), block_of(pd.diff_dst_desc())};
  } else if (k.kind == ConvKind::BackwardFilter) {
    using Bwd = dnnl::convolution_backward_weights;
    const Bwd::desc desc(alg, src, any_weights, dst, strides, dilates, pl, pr);
    Bwd::primitive_desc pd(desc, onednn_engine(), fwd);
    first_offered(pd);
    blocks = {block_of(pd.src_desc()), block_of(pd.diff_dst_desc())};
  }
  return known[key] = blocks;
}

std::shared_ptr<ConvPrimitive> create(const ConvProblem& k) {
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  auto p = std::make_shared<ConvPrimitive>();
  p->src = activation_desc(k.n, k.channels, k.length, k.x_block);
  p->dst = activation_desc(k.n, k.filters, k.out_length(), k.y_block);
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
      choose<BwdData>(
          k, *p, [&] { return BwdData::primitive_desc(data_desc, attr, onednn_engine(), hint); },
          [](const auto& pd) { return pd.weights_desc(); });
      break;
    }
    case ConvKind::BackwardFilter: {
      const Fwd::primitive_desc hint = fwd_pd();
      choose<BwdWeights>(
          k, *p,
          [&] { return BwdWeights::primitive_desc(weights_desc, attr, onednn_engine(), hint); },
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

int64_t steps_of(const Shape& s, int64_t block) { return block ? s[2] : s[1]; }

// Roles of the kernel's tensors: (x, w, y) for the forward op, (gx, w, gy) for backward
// data, (x, gw, gy) for backward filter.
struct Roles {
  const TensorRef *x, *w, *y;
};

template <ConvKind Kind> Roles roles(const KernelCtx& c) {
  if constexpr (Kind == ConvKind::Forward)
    return {&c.in[0], &c.in[1], &c.out[0]};
  else if constexpr (Kind == ConvKind::BackwardData)
    return {&c.out[0], &c.in[1], &c.in[0]};
  else
    return {&c.in[0], &c.out[0], &c.in[1]};
}

template <ConvKind Kind> ConvProblem key_of(const KernelCtx& c) {
  const auto& a = c.attrs.as<ConvAttrs>();
  const Roles r = roles<Kind>(c);
  return {Kind,
          r.x->shape[0],
          steps_of(r.x->shape, a.x_block),
          r.w->shape[1],
          r.w->shape[2],
          r.w->shape[0],
          a.stride,
          a.dilation,
          a.pad_l,
          a.pad_r,
          Kind == ConvKind::Forward && c.in.size() == 3,
          Kind == ConvKind::Forward ? a.activation : Activation::Linear,
          a.x_block,
          a.y_block};
}

// An empty batch, sequence, channel or filter axis: oneDNN has no primitive for it, and the
// result is empty or a sum over nothing (zeros).
bool empty(const Roles& r) { return r.x->numel() == 0 || r.w->numel() == 0 || r.y->numel() == 0; }

// The per-shape setup, called once per geometry by the dispatcher's cache.
template <ConvKind Kind> std::shared_ptr<void> prepare(const KernelCtx& c) {
  if (c.in[0].dtype != DType::Float32 || empty(roles<Kind>(c))) return nullptr;
  const ConvProblem key = key_of<Kind>(c);
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

std::string describe_state(const void* state) {
  return static_cast<const ConvPrimitive*>(state)->impl;
}

// conv1d_fused's relu or hard_sigmoid, which oneDNN does not apply
// (activation_after_primitive), over the real filters only: a blocked output's padding
// lanes stay zero, as oneDNN keeps them.
void apply_activation(const TensorRef& y, const ConvAttrs& a) {
  if (!a.y_block) {
    const int64_t filters = y.shape[2];
    if (filters)
      bias_activation(y.ptr<float>(), nullptr, y.numel() / filters, filters, a.activation);
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
        bias_activation(r.y->ptr<T>(), c.in[2].ptr<const T>(), r.y->shape[0] * r.y->shape[1],
                        r.y->shape[2], a.activation);
  };
  if (empty(r)) {
    std::memset(c.out[0].data, 0, c.out[0].numel() * itemsize(c.out[0].dtype));
    visit_float(c.out[0].dtype, epilogue);
    return;
  }
  if (c.in[0].dtype == DType::Float64) {
    const ConvGeometry g{r.x->shape[0], r.x->shape[1], r.x->shape[2], r.w->shape[2], r.w->shape[0],
                         r.y->shape[1], a.stride,      a.dilation,    a.pad_l};
    if constexpr (Kind == ConvKind::Forward) {
      conv1d_reference(g, r.x->ptr<const double>(), r.w->ptr<const double>(), r.y->ptr<double>());
      epilogue.template operator()<double>();
    } else if constexpr (Kind == ConvKind::BackwardData)
      conv1d_backward_data_reference(g, r.y->ptr<const double>(), r.w->ptr<const double>(),
                                     r.x->ptr<double>());
    else
      conv1d_backward_filter_reference(g, r.x->ptr<const double>(), r.y->ptr<const double>(),
                                       r.w->ptr<double>());
    return;
  }
  run(*static_cast<const ConvPrimitive*>(c.state), Kind, r.x->data, r.w->data, r.y->data,
      Kind == ConvKind::Forward && c.in.size() == 3 ? c.in[2].data : nullptr);
  if constexpr (Kind == ConvKind::Forward)
    if (c.in.size() == 3 && activation_after_primitive(a.activation)) apply_activation(*r.y, a);
}

}  // namespace

std::pair<int64_t, int64_t> onednn_preferred_blocks(const ConvProblem& p) {
  try {
    return preferred_blocks(p);
  } catch (const dnnl::error& e) {
    throw BackendError(std::string("[conv1d] oneDNN primitive creation failed: ") + e.what());
  }
}

Kernel conv1d_kernel(ConvKind kind) {
  switch (kind) {
    case ConvKind::Forward:
      return {kernel<ConvKind::Forward>, prepare<ConvKind::Forward>, describe_state};
    case ConvKind::BackwardData:
      return {kernel<ConvKind::BackwardData>, prepare<ConvKind::BackwardData>, describe_state};
    case ConvKind::BackwardFilter:
      return {kernel<ConvKind::BackwardFilter>, prepare<ConvKind::BackwardFilter>, describe_state};
  }
  return {};
}

}  // namespace encore::cpu

namespace encore {

std::vector<ConvPrimitiveInfo> conv1d_primitives() {
  std::lock_guard lock(cpu::g_chosen_mutex);
  std::vector<ConvPrimitiveInfo> out;
  for (const auto& [key, impl] : cpu::chosen()) out.push_back({key, impl});
  return out;
}

void clear_conv1d_primitives() {
  {
    std::lock_guard lock(cpu::g_chosen_mutex);
    cpu::chosen().clear();
  }
  clear_prepared();
  // oneDNN keeps its own cache of primitives: without flushing it, a shape seen before would
  // be "created" again at no cost and the setup would look free.
  const int capacity = dnnl::get_primitive_cache_capacity();
  dnnl::set_primitive_cache_capacity(0);
  dnnl::set_primitive_cache_capacity(capacity);
}

}  // namespace encore
