// The host allocator: 64-byte aligned malloc (AVX-512 loads in BLAS/oneDNN) that keeps freed
// blocks and hands them out again for the same size. An eager training step allocates the same
// activations and gradients every step, which a replay, whose arena is allocated once, does not:
// - a fresh large block pays the page faults of its first touch (the system zero-fills every
//   page);
// - glibc's aligned path for a small block (a few KiB: largebin requests that consolidate the
//   fastbins every time) took a fifth of a dispatch-bound eager step.
// Blocks below kLarge and larger ones are cached apart. Each cache holds at most its cap, and
// never more than the most bytes this allocator ever had in use at once: a fixed-shape step
// finds all it frees kept, while a loop whose sizes keep changing (eager steps over varying
// lengths) does not hoard blocks of sizes that never come back; past the bound, the least
// recently freed blocks go first. Reuses are counted in the ledger. Under AddressSanitizer a
// cached block is poisoned, so a use after free still reports.
#pragma once

#include "core/cxx20.h"

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/allocator.h"

namespace encore {

class CpuAllocator final : public Allocator {
 public:
  static constexpr size_t kLarge = size_t{1} << 20;
  static constexpr size_t kSmallCap = size_t{64} << 20, kLargeCap = size_t{2} << 30;

  CpuAllocator() = default;
  CpuAllocator(const CpuAllocator&) = delete;
  CpuAllocator& operator=(const CpuAllocator&) = delete;
  ~CpuAllocator() override { release_cached(); }

  void* allocate(size_t nbytes, Device device) override;
  void deallocate(void* ptr, size_t nbytes, Device device) override;
  /// Bytes of freed blocks kept for reuse.
  size_t cached_bytes();
  /// Frees every cached block.
  void release_cached();

 private:
  // Freed blocks of one size class by size, each with when it was freed (oldest first). Taking
  // and keeping a block allocate nothing once its size has been seen; finding the oldest block
  // scans the sizes, which happens only past the bound, next to a free().
  struct Cache {
    explicit Cache(size_t c) : cap(c) {}
    size_t cap;
    size_t bytes = 0;
    uint64_t next_seq = 0;
    std::unordered_map<size_t, std::vector<std::pair<uint64_t, void*>>> by_size;

    void* take(size_t size);
    bool keep(void* ptr, size_t size, size_t limit) noexcept;
    void evict_oldest();
    void release();
  };

  friend CpuAllocator& cpu_allocator();  // holds mutex_ across fork()

  Cache& cache_for(size_t size) { return size < kLarge ? small_ : large_; }
  void in_use(size_t size);

  std::mutex mutex_;
  Cache small_{kSmallCap}, large_{kLargeCap};
  // Bytes of blocks in use, and the most at once: the caches' bound. Not the ledger's peak,
  // which users and compare_modes reset.
  size_t live_ = 0, peak_ = 0;
};

/// The process's host allocator.
CpuAllocator& cpu_allocator();

}  // namespace encore
