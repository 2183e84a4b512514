// Raw memory per device. The CPU allocator (core/cpu_allocator.h) is 64-byte aligned malloc that
// keeps freed blocks for the next allocation of the same size; the CUDA allocator (core/cuda/)
// takes memory from a stream-ordered pool. Every allocation is counted in the ledger; failure
// throws OutOfMemoryError and leaves the runtime usable.
#pragma once

#include "core/cxx20.h"

#include <cstddef>

#include "core/device.h"

namespace encore {

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t nbytes, Device device) = 0;
  /// `nbytes` is the size the block was allocated with.
  virtual void deallocate(void* ptr, size_t nbytes, Device device) = 0;
};

/// The allocator for a device; throws DeviceError when its backend is not loaded (see
/// core/backend.h) or the device is not present.
Allocator& allocator_for(Device device);

/// Bytes of freed host blocks the CPU allocator keeps for reuse (in no tensor).
size_t cpu_cached_bytes();
/// Hands the memory encore keeps for reuse back to the system: the host allocator's cached
/// blocks, the per-shape kernel states (ops/prepared.h) and the unused part of each CUDA
/// device's pool (after its pending frees). Memory in tensors and in traced graphs (their
/// arenas and states) stays; the next steps allocate and prepare afresh.
void release_cached_memory();
/// For the caches of higher layers (the dispatcher's per-shape states): `release` runs first
/// in every release_cached_memory().
void on_release_cached_memory(void (*release)());

}  // namespace encore
