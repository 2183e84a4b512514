#include "core/cpu_allocator.h"

#include <pthread.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#else
#define ASAN_POISON_MEMORY_REGION(p, n) ((void)(p), (void)(n))
#define ASAN_UNPOISON_MEMORY_REGION(p, n) ((void)(p), (void)(n))
#endif

#include "core/backend.h"
#include "core/error.h"
#include "core/ledger.h"

namespace encore {

namespace {
size_t rounded(size_t nbytes) { return (std::max<size_t>(nbytes, 1) + 63) & ~size_t{63}; }
}  // namespace

void* CpuAllocator::allocate(size_t nbytes, Device) {
  const size_t size = rounded(nbytes);
  void* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if ((p = cache_for(size).take(size))) {
      ASAN_UNPOISON_MEMORY_REGION(p, size);
      in_use(size);
    }
  }
  if (p) {  // counted outside the lock: the ledger takes a lock of its own on a thread's first add
    Ledger::global().add(Counter::AllocationsReused, 1);
    return p;
  }
  p = std::aligned_alloc(64, size);
  if (!p) {  // the cached blocks may be what is missing
    release_cached();
    p = std::aligned_alloc(64, size);
  }
  ENCORE_CHECK(p, OutOfMemoryError, "[alloc] out of host memory allocating ", nbytes, " bytes");
  std::lock_guard<std::mutex> lock(mutex_);
  in_use(size);
  return p;
}

void CpuAllocator::deallocate(void* ptr, size_t nbytes, Device) {
  const size_t size = rounded(nbytes);
  std::lock_guard<std::mutex> lock(mutex_);
  live_ -= size;
  Cache& cache = cache_for(size);
  if (cache.keep(ptr, size, std::min(cache.cap, peak_)))
    ASAN_POISON_MEMORY_REGION(ptr, size);
  else
    std::free(ptr);
}

size_t CpuAllocator::cached_bytes() {
  std::lock_guard<std::mutex> lock(mutex_);
  return small_.bytes + large_.bytes;
}

void CpuAllocator::release_cached() {
  std::lock_guard<std::mutex> lock(mutex_);
  small_.release();
  large_.release();
}

void CpuAllocator::in_use(size_t size) {
  live_ += size;
  peak_ = std::max(peak_, live_);
}

void* CpuAllocator::Cache::take(size_t size) {
  auto it = by_size.find(size);
  if (it == by_size.end() || it->second.empty()) return nullptr;
  void* p = it->second.back().second;
  it->second.pop_back();
  bytes -= size;
  return p;
}

// Whether the block was kept: not when it alone is over `limit`, or the bookkeeping cannot grow.
// Older blocks are freed to make room.
bool CpuAllocator::Cache::keep(void* ptr, size_t size, size_t limit) noexcept {
  if (size > limit) return false;
  try {
    by_size[size].emplace_back(next_seq++, ptr);
  } catch (const std::bad_alloc&) {
    return false;
  }
  bytes += size;
  while (bytes > limit) evict_oldest();  // never the block just kept: it is the newest
  return true;
}

void CpuAllocator::Cache::evict_oldest() {
  auto oldest = by_size.end();
  for (auto it = by_size.begin(); it != by_size.end();) {
    if (it->second.empty()) {  // sizes all taken since the last eviction
      it = by_size.erase(it);
      continue;
    }
    if (oldest == by_size.end() || it->second.front().first < oldest->second.front().first)
      oldest = it;
    ++it;
  }
  void* p = oldest->second.front().second;
  oldest->second.erase(oldest->second.begin());
  bytes -= oldest->first;
  ASAN_UNPOISON_MEMORY_REGION(p, oldest->first);
  std::free(p);
}

void CpuAllocator::Cache::release() {
  for (const auto& [size, blocks] : by_size) {
    for (const auto& [seq, p] : blocks) {
      ASAN_UNPOISON_MEMORY_REGION(p, size);
      std::free(p);
    }
  }
  by_size.clear();
  bytes = 0;
}

// Made on first use and never destroyed: other static objects may allocate before this file's
// statics exist, and free after they are gone.
CpuAllocator& cpu_allocator() {
  static CpuAllocator* allocator = [] {
    // A fork() while another thread held the mutex would leave the child's copy locked for
    // good: the forking thread takes it first, and both processes release it.
    pthread_atfork([] { cpu_allocator().mutex_.lock(); }, [] { cpu_allocator().mutex_.unlock(); },
                   [] { cpu_allocator().mutex_.unlock(); });
    return new CpuAllocator;
  }();
  return *allocator;
}

namespace {
// Made while the library loads: a fork() while another thread was inside the first use would
// leave the child waiting on a half-done initialization.
[[maybe_unused]] const CpuAllocator& g_made_at_load = cpu_allocator();
}  // namespace

size_t cpu_cached_bytes() { return cpu_allocator().cached_bytes(); }

namespace {
std::mutex g_releasers_mutex;
std::vector<void (*)()>& releasers() {
  static auto* r = new std::vector<void (*)()>();  // registered while libraries load
  return *r;
}
}  // namespace

void on_release_cached_memory(void (*release)()) {
  std::lock_guard<std::mutex> lock(g_releasers_mutex);
  releasers().push_back(release);
}

void release_cached_memory() {
  {
    std::lock_guard<std::mutex> lock(g_releasers_mutex);
    for (void (*release)() : releasers()) release();
  }
  // The states first: the workspaces they held go back to the pools trimmed below.
  cpu_allocator().release_cached();
  // Not loading the CUDA plugin (hundreds of MB of libraries) when it has cached nothing.
  if (Backend* cuda = loaded_backend(DeviceType::CUDA)) cuda->release_cached_memory();
}

}  // namespace encore
