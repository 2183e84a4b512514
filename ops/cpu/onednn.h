// What the CPU kernels that call oneDNN share: one engine, a stream and scratch memory per
// thread, Keras' activations as post-ops, the matmul of large float32 products.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "ops/activation.h"

namespace encore::cpu {

/// Turns oneDNN's own primitive cache off unless the environment sets its capacity
/// (ONEDNN_PRIMITIVE_CACHE_CAPACITY): every primitive encore runs is held by a prepared state
/// (ops/prepared.h), whose cache is bounded in bytes and emptied by release_cached_memory();
/// oneDNN's would keep evicted primitives alive beyond both. Once per process, while libencore
/// loads (ops/prepared.cpp), before any code saves and restores the capacity.
inline void configure_onednn_primitive_cache() {
  static const bool configured = [] {
    if (!std::getenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY") &&
        !std::getenv("DNNL_PRIMITIVE_CACHE_CAPACITY"))
      dnnl::set_primitive_cache_capacity(0);
    return true;
  }();
  (void)configured;
}

/// The CPU engine.
inline dnnl::engine& onednn_engine() {
  static dnnl::engine e = [] {
    configure_onednn_primitive_cache();
    return dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
  return e;
}

/// Empties oneDNN's primitive cache, when the environment turned it on.
inline void flush_onednn_primitive_cache() {
  const int capacity = dnnl::get_primitive_cache_capacity();
  if (capacity == 0) return;
  dnnl::set_primitive_cache_capacity(0);
  dnnl::set_primitive_cache_capacity(capacity);
}

/// This thread's in-order stream on the engine.
inline dnnl::stream& onednn_stream() {
  static thread_local dnnl::stream s(onednn_engine());
  return s;
}

inline constexpr int kScratchSlots = 7;

/// `bytes` of 64-byte aligned memory owned by this thread, slot `slot` < kScratchSlots (a
/// kernel that needs several buffers at once takes several slots), valid until the thread's
/// next call for the same slot. Per thread, not per primitive: threads may run one prepared
/// primitive at once.
inline std::byte* thread_scratch(int slot, size_t bytes) {
  constexpr size_t kAlign = 64;
  static thread_local std::vector<std::byte> buffers[kScratchSlots];
  std::vector<std::byte>& b = buffers[slot];
  if (b.size() < bytes + kAlign) b.resize(bytes + kAlign);
  return b.data() + (kAlign - reinterpret_cast<uintptr_t>(b.data()) % kAlign) % kAlign;
}

/// Whether a fused op applies `a` itself after the oneDNN primitive (as bias_activation, no bias:
/// one read and write of the output): a fusable activation with no library form (relu and
/// hard_sigmoid, whose oneDNN forms lose NaNs; ops/activation.h).
inline bool activation_after_primitive(Activation a) {
  return visit_activation(a, [](auto act) {
    return act.id != Activation::Linear && act.grad_from_output && act.library == LibraryForm::None;
  });
}

/// The activation's library form as oneDNN eltwise post-ops; none for the others.
inline dnnl::post_ops activation_post_ops(Activation a) {
  using alg = dnnl::algorithm;
  dnnl::post_ops ops;
  switch (visit_activation(a, [](auto act) { return act.library; })) {
    case LibraryForm::Tanh:
      ops.append_eltwise(1.0f, alg::eltwise_tanh, 0.0f, 0.0f);
      break;
    case LibraryForm::Logistic:
      ops.append_eltwise(1.0f, alg::eltwise_logistic, 0.0f, 0.0f);
      break;
    case LibraryForm::None:
      break;
  }
  return ops;
}

/// Multiply-adds from which oneDNN's matmul beats the BLAS call (its fixed cost, ~5 us, is paid
/// back): Dense(128) on 32 rows (2^20) already ran 0.7x; idle, 2 threads, 0.56-0.97x OpenBLAS's
/// time from 32 x 12800 -> 64 to 1024^3 (docs/BENCHMARKS.md). dense and matmul switch here.
inline constexpr int64_t kOnednnMatmulFrom = int64_t{1} << 20;

/// A oneDNN matmul on float32 operands as they lie (any strides; `bias` a zero desc for none),
/// with `post_ops`: dense's and matmul's prepared state. Its scratchpad is the thread's.
struct PlainMatmul {
  dnnl::matmul primitive;
  dnnl::memory::desc src, weights, bias, dst, scratchpad;

  PlainMatmul(dnnl::memory::desc src_, dnnl::memory::desc weights_, dnnl::memory::desc bias_,
              dnnl::memory::desc dst_, const dnnl::post_ops& post_ops, const char* op)
      : src(src_), weights(weights_), bias(bias_), dst(dst_) {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    attr.set_post_ops(post_ops);
    try {
      const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, weights, bias, dst), attr,
                                            onednn_engine());
      primitive = dnnl::matmul(pd);
      scratchpad = pd.scratchpad_desc();
    } catch (const dnnl::error& e) {
      throw BackendError(std::string("[") + op + "] oneDNN matmul creation failed: " + e.what());
    }
  }

  /// dst = src @ weights (+ bias), then the post-ops; `b` is ignored without a bias.
  void run(const void* s, const void* w, const void* b, void* d) const {
    const dnnl::engine& e = onednn_engine();
    const auto memory = [&](const dnnl::memory::desc& md, const void* p) {
      return dnnl::memory(md, e, const_cast<void*>(p));
    };
    std::unordered_map<int, dnnl::memory> args = {
        {DNNL_ARG_SRC, memory(src, s)},
        {DNNL_ARG_WEIGHTS, memory(weights, w)},
        {DNNL_ARG_DST, memory(dst, d)},
        {DNNL_ARG_SCRATCHPAD, memory(scratchpad, thread_scratch(0, scratchpad.get_size()))}};
    if (!bias.is_zero()) args.emplace(DNNL_ARG_BIAS, memory(bias, b));
    dnnl::stream& stream = onednn_stream();
    primitive.execute(stream, args);
    stream.wait();
  }
};

}  // namespace encore::cpu
