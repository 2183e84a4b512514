// What the CPU kernels that call oneDNN share: one engine, and scratch memory per thread.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

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

/// `bytes` of 64-byte aligned memory owned by this thread, slot `slot` (a kernel that needs two
/// buffers at once takes two slots), valid until the thread's next call for the same slot. Per
/// thread, not per primitive: threads may run one prepared primitive at once.
inline std::byte* thread_scratch(int slot, size_t bytes) {
  constexpr size_t kAlign = 64;
  static thread_local std::vector<std::byte> buffers[2];
  std::vector<std::byte>& b = buffers[slot];
  if (b.size() < bytes + kAlign) b.resize(bytes + kAlign);
  return b.data() + (kAlign - reinterpret_cast<uintptr_t>(b.data()) % kAlign) % kAlign;
}

}  // namespace encore::cpu
