#include "core/storage.h"

#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>

#include "core/allocator.h"
#include "core/backend.h"
#include "core/error.h"
#include "core/ledger.h"

namespace encore {

namespace {

// 64-byte aligned malloc (AVX-512 loads in BLAS/oneDNN). Large blocks are kept when freed and
// handed out again for the same size: an eager training step allocates the same large
// activations and gradients every step, and a fresh large block pays the page faults of its
// first touch (the system zero-fills every page), which a replay, whose arena is allocated
// once, does not. At most kCacheLimit bytes stay cached; reuses are counted in the ledger.
class CpuAllocator final : public Allocator {
 public:
  static constexpr size_t kLarge = size_t{1} << 20, kCacheLimit = size_t{2} << 30;

  void* allocate(size_t nbytes, Device) override {
    const size_t size = (std::max<size_t>(nbytes, 1) + 63) & ~size_t{63};
    if (size < kLarge) return checked(std::aligned_alloc(64, size), nbytes);
    std::lock_guard<std::mutex> lock(mutex_);
    void* p = nullptr;
    if (auto it = cached_.find(size); it != cached_.end()) {
      p = it->second;
      cached_.erase(it);
      cached_bytes_ -= size;
      Ledger::global().add(Counter::AllocationsReused, 1);
    } else {
      p = std::aligned_alloc(64, size);
      if (!p) {  // the cached blocks may be what is missing
        release_cached();
        p = std::aligned_alloc(64, size);
      }
    }
    live_.emplace(checked(p, nbytes), size);
    return p;
  }

  void deallocate(void* ptr, Device) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (auto it = live_.find(ptr); it != live_.end()) {
        const size_t size = it->second;
        live_.erase(it);
        if (cached_bytes_ + size <= kCacheLimit) {
          cached_.emplace(size, ptr);
          cached_bytes_ += size;
          return;
        }
      }
    }
    std::free(ptr);
  }

 private:
  static void* checked(void* p, size_t nbytes) {
    ENCORE_CHECK(p, OutOfMemoryError, "[alloc] out of host memory allocating ", nbytes, " bytes");
    return p;
  }
  void release_cached() {
    for (auto& [size, p] : cached_) std::free(p);
    cached_.clear();
    cached_bytes_ = 0;
  }

  std::mutex mutex_;
  std::unordered_map<void*, size_t> live_;         // large blocks in use, by address
  std::unordered_multimap<size_t, void*> cached_;  // freed large blocks, by size
  size_t cached_bytes_ = 0;
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
  allocator_for(device_).deallocate(data_, device_);
  Ledger::global().on_free(nbytes_);
}

}  // namespace encore
