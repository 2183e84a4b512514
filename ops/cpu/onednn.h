// What the CPU kernels that call oneDNN share: one engine, a stream and scratch memory per
// thread, Keras' activations as post-ops.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

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

}  // namespace encore::cpu
