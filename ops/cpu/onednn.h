// What the CPU kernels that call oneDNN share: one engine, a stream and scratch memory per
// thread, Keras' activations as post-ops.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ops/activation.h"

namespace encore::cpu {

inline dnnl::engine& onednn_engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
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

/// Keras' activation `a` as oneDNN eltwise post-ops (fn::activate's formulas); gelu and softmax,
/// which no fused op accepts (fusable_activation), add none.
inline dnnl::post_ops activation_post_ops(Activation a) {
  using alg = dnnl::algorithm;
  dnnl::post_ops ops;
  switch (a) {
    case Activation::Relu: ops.append_eltwise(1.0f, alg::eltwise_relu, 0.0f, 0.0f); break;
    case Activation::Tanh: ops.append_eltwise(1.0f, alg::eltwise_tanh, 0.0f, 0.0f); break;
    case Activation::Sigmoid: ops.append_eltwise(1.0f, alg::eltwise_logistic, 0.0f, 0.0f); break;
    case Activation::HardSigmoid:  // clip(0.2 x + 0.5, 0, 1)
      ops.append_eltwise(1.0f, alg::eltwise_linear, 0.2f, 0.5f);
      ops.append_eltwise(1.0f, alg::eltwise_clip, 0.0f, 1.0f);
      break;
    case Activation::Linear:
    case Activation::Gelu:
    case Activation::Softmax: break;
  }
  return ops;
}

}  // namespace encore::cpu
