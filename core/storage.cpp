#include "core/storage.h"

#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#else
#define ASAN_POISON_MEMORY_REGION(p, n) ((void)(p), (void)(n))
#define ASAN_UNPOISON_MEMORY_REGION(p, n) ((void)(p), (void)(n))
#endif

#include "core/allocator.h"
#include "core/backend.h"
#include "core/error.h"
#include "core/ledger.h"

namespace encore {

namespace {

// 64-byte aligned malloc (AVX-512 loads in BLAS/oneDNN) that keeps freed blocks and hands them
// out again for the same size. An eager training step allocates the same activations and
// gradients every step, which a replay, whose arena is allocated once, does not:
// - a fresh large block pays the page faults of its first touch (the system zero-fills every
//   page);
// - glibc's aligned path for a small block (a few KiB: largebin requests that consolidate the
//   fastbins every time) took a fifth of a dispatch-bound eager step.
// At most kSmallCacheLimit bytes of blocks below kLarge and kLargeCacheLimit bytes of larger
// ones stay cached; reuses are counted in the ledger. Under AddressSanitizer a cached block is
// poisoned, so a use after free still reports.
class CpuAllocator final : public Allocator {
 public:
  static constexpr size_t kLarge = size_t{1} << 20;
  static constexpr size_t kSmallCacheLimit = size_t{64} << 20, kLargeCacheLimit = size_t{2} << 30;

  void* allocate(size_t nbytes, Device) override {
    const size_t size = rounded(nbytes);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (auto it = cached_.find(size); it != cached_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        cached_bytes(size) -= size;
        ASAN_UNPOISON_MEMORY_REGION(p, size);
        Ledger::global().add(Counter::AllocationsReused, 1);
        return p;
      }
    }
    void* p = std::aligned_alloc(64, size);
    if (!p) {  // the cached blocks may be what is missing
      release_cached();
      p = std::aligned_alloc(64, size);
    }
    ENCORE_CHECK(p, OutOfMemoryError, "[alloc] out of host memory allocating ", nbytes, " bytes");
    return p;
  }

  void deallocate(void* ptr, size_t nbytes, Device) override {
    if (!keep(ptr, rounded(nbytes))) std::free(ptr);
  }

 private:
  static size_t rounded(size_t nbytes) { return (std::max<size_t>(nbytes, 1) + 63) & ~size_t{63}; }
  size_t& cached_bytes(size_t size) { return size < kLarge ? small_bytes_ : large_bytes_; }

  // Puts a freed block into the cache; false when the cache is full (or cannot grow).
  bool keep(void* ptr, size_t size) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    size_t& bytes = cached_bytes(size);
    if (bytes + size > (size < kLarge ? kSmallCacheLimit : kLargeCacheLimit)) return false;
    try {
      cached_[size].push_back(ptr);
    } catch (const std::bad_alloc&) {
      return false;
    }
    bytes += size;
    ASAN_POISON_MEMORY_REGION(ptr, size);
    return true;
  }

  void release_cached() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [size, blocks] : cached_) {
      for (void* p : blocks) {
        ASAN_UNPOISON_MEMORY_REGION(p, size);
        std::free(p);
      }
    }
    cached_.clear();
    small_bytes_ = large_bytes_ = 0;
  }

  std::mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> cached_;  // freed blocks by rounded size
  size_t small_bytes_ = 0, large_bytes_ = 0;
};

// Made on first use and never destroyed: other static objects may allocate before this file's
// statics exist, and free after they are gone.
CpuAllocator& cpu_allocator() {
  static CpuAllocator* allocator = new CpuAllocator;
  return *allocator;
}

}  // namespace

Allocator& allocator_for(Device device) {
  if (device.is_cpu()) return cpu_allocator();
  return require_backend(device, "alloc").allocator(device.index);
}

std::shared_ptr<Storage> Storage::allocate(size_t nbytes, Device device) {
  std::shared_ptr<Storage> s(new Storage());
  s->data_ = allocator_for(device).allocate(nbytes, device);
  s->nbytes_ = nbytes;
  s->device_ = device;
  s->owned_ = true;
  Ledger::global().on_allocate(nbytes);
  return s;
}

std::shared_ptr<Storage> Storage::wrap(void* data, size_t nbytes, Device device,
                                       std::shared_ptr<void> owner) {
  std::shared_ptr<Storage> s(new Storage());
  s->data_ = data;
  s->nbytes_ = nbytes;
  s->device_ = device;
  s->owner_ = std::move(owner);
  return s;
}

std::shared_ptr<Storage> Storage::symbolic(size_t nbytes, Device device, uint64_t trace_id,
                                           uint32_t buffer) {
  std::shared_ptr<Storage> s(new Storage());
  s->nbytes_ = nbytes;
  s->device_ = device;
  s->trace_id_ = trace_id;
  s->buffer_ = buffer;
  return s;
}

Storage::~Storage() {
  if (!owned_ || !data_) return;
  allocator_for(device_).deallocate(data_, nbytes_, device_);
  Ledger::global().on_free(nbytes_);
}

}  // namespace encore
