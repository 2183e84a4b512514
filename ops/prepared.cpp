#include "ops/prepared.h"

#include <malloc.h>

#include <atomic>
#include <list>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
// The sanitizer runtime's (GCC ships no allocator_interface.h; Clang declares it there).
extern "C" size_t __sanitizer_get_current_allocated_bytes();
#endif

#include "core/allocator.h"
#include "core/ledger.h"
#include "core/modes.h"
#include "core/threads.h"
#include "ops/autotune.h"
#include "ops/cpu/onednn.h"

namespace encore {

namespace {

struct Geometry {
  Shape shape;
  Strides strides;
  DType dtype;
  bool operator==(const Geometry&) const = default;
};

struct Key {
  const OpDef* op;
  Device device;
  bool tf32;            // cuBLAS/cuDNN math mode chosen at setup
  int threads;          // CPU: a oneDNN primitive runs on the thread count it was created for
  uint64_t user;        // CUDA: 0 for the graphs, else the eager calling thread (StateUser)
  uint64_t generation;  // bumped by autotune policy changes, loads and clears
  std::vector<Geometry> tensors;  // inputs, then outputs
  size_t inputs;                  // how many of them are inputs
  Attrs attrs;
  size_t hash;
  bool operator==(const Key& o) const {
    return hash == o.hash && op == o.op && device == o.device && tf32 == o.tf32 &&
           threads == o.threads && user == o.user && generation == o.generation &&
           inputs == o.inputs && tensors == o.tensors && attrs == o.attrs;
  }
};

struct KeyHash {
  size_t operator()(const Key& k) const { return k.hash; }
};

// A number for the calling thread, never 0 and never reused.
uint64_t thread_number() {
  static std::atomic<uint64_t> next{1};
  thread_local const uint64_t number = next.fetch_add(1, std::memory_order_relaxed);
  return number;
}

// The hash covers the op and the geometry; calls that differ only in attributes share a bucket
// and are told apart by equality.
Key key_of(const OpDef& def, Device device, const KernelCtx& ctx, StateUser user) {
  const bool cpu = device.type == DeviceType::CPU;
  Key k{&def,
        device,
        allow_tf32(),
        cpu ? num_threads() : 0,
        cpu || user == StateUser::Graph ? 0 : thread_number(),
        autotune::detail::generation(),
        {},
        ctx.in.size(),
        ctx.attrs,
        0};
  size_t h = std::hash<const void*>()(&def) ^
             (static_cast<size_t>(device.type) << 8 | static_cast<size_t>(device.index));
  auto mix = [&h](int64_t v) { h = (h ^ static_cast<size_t>(v)) * 0x100000001b3ull; };
  h ^= static_cast<size_t>(k.user) * 0x9e3779b97f4a7c15ull;
  mix(static_cast<int64_t>(ctx.in.size()));
  k.tensors.reserve(ctx.in.size() + ctx.out.size());
  for (const auto* refs : {&ctx.in, &ctx.out}) {
    for (const TensorRef& r : *refs) {
      k.tensors.push_back({r.shape, r.strides, r.dtype});
      mix(static_cast<int64_t>(r.dtype));
      for (int64_t d : r.shape) mix(d);
      for (int64_t s : r.strides) mix(s);
    }
  }
  k.hash = h;
  return k;
}

// Bytes the C library's allocator has handed out (glibc: its arenas and mmapped blocks;
// AddressSanitizer's allocator in an ASan build): what a setup allocates, JIT code included.
size_t heap_bytes() {
#if defined(__SANITIZE_ADDRESS__)
  return __sanitizer_get_current_allocated_bytes();
#else
  const struct mallinfo2 m = ::mallinfo2();
  return m.uordblks + m.hblkhd;
#endif
}

// The key, the list node and the index slot: counted for an entry that allocates nothing else.
constexpr size_t kEntryOverhead = 256;
// What a setup counts before any of its op was measured: a convolution primitive's size.
constexpr size_t kUnmeasuredBytes = size_t{256} << 10;

// How much a setup allocates, from the heap's bytes in use before and after it. glibc's
// mallinfo2 walks the heap's free chunks: tens of microseconds in a process that allocates
// mostly through encore (whose allocator keeps its blocks), but a heap fragmented by many small
// objects took 0.1 s. Past a budget per walk, setups count their op's mean measured size
// instead, and every 64th walks again, to notice when the heap is cheap to walk once more.
class HeapMeter {
 public:
  /// The heap's bytes in use, or nothing when walking it costs too much (unless `always`).
  std::optional<size_t> read(bool always = false) {
    if (!cheap_ && !always && ++skipped_ % 64 != 0) return std::nullopt;
    const int64_t start = now_ns();
    const size_t bytes = heap_bytes();
    cheap_ = now_ns() - start < kBudgetNs;
    return bytes;
  }
  void record(const OpDef* op, size_t bytes) {
    auto& [total, setups] = measured_[op];
    total += bytes;
    ++setups;
  }
  size_t estimate(const OpDef* op) const {
    const auto it = measured_.find(op);
    return it == measured_.end() ? kUnmeasuredBytes : it->second.first / it->second.second;
  }

 private:
  static constexpr int64_t kBudgetNs = 200'000;
  bool cheap_ = true;
  uint64_t skipped_ = 0;
  std::unordered_map<const OpDef*, std::pair<size_t, size_t>> measured_;  // op: bytes, setups
};

std::atomic<size_t> g_limit{size_t{256} << 20};

class Cache {
 public:
  std::shared_ptr<void> get(Key key, Device device, const KernelCtx& ctx, PrepareFn prepare);
  void trim(size_t limit);
  void clear() {
    index_.clear();
    lru_.clear();
    bytes_ = 0;
  }
  size_t bytes() const { return bytes_; }
  size_t size() const { return lru_.size(); }

 private:
  struct Entry {
    Key key;
    std::shared_ptr<void> state;
    size_t bytes;
  };
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<Key, std::list<Entry>::iterator, KeyHash> index_;
  size_t bytes_ = 0;
};

// Every cache operation holds the lock, setups included: a setup made twice would be paid
// twice. Recursive: a kernel's setup may get the RNN setup it shares (prepared_setup).
struct Current {
  std::recursive_mutex mutex;
  std::shared_ptr<Cache> cache = std::make_shared<Cache>();
  HeapMeter meter;
};
Current& current() {
  static Current* c = new Current();  // never destroyed: kernels may run during static destruction
  return *c;
}
// What the setups made on this thread counted for themselves (running totals): a setup made
// inside another (prepared_setup from a PrepareFn) is not counted again by the outer one.
struct Nested {
  size_t bytes = 0;
  int64_t ns = 0;
};
thread_local Nested t_nested;

void publish(const Cache& c) {
  Ledger& ledger = Ledger::global();
  ledger.set(Gauge::PreparedBytes, static_cast<int64_t>(c.bytes()));
  ledger.set(Gauge::PreparedEntries, static_cast<int64_t>(c.size()));
}

std::shared_ptr<void> Cache::get(Key key, Device device, const KernelCtx& ctx, PrepareFn prepare) {
  Ledger& ledger = Ledger::global();
  // A shape that needs no state (a small Dense on the BLAS path) is neither searched nor
  // reused: the autotune counters count what was.
  if (auto it = index_.find(key); it != index_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second);
    if (it->second->state) ledger.add(Counter::AutotuneHits, 1);
    return it->second->state;
  }
  const Nested before = t_nested;
  HeapMeter& meter = current().meter;
  const std::optional<size_t> heap_before = meter.read();
  const int64_t device_before = device.is_cuda() ? ledger.get(Counter::BytesAllocated) : 0;
  const int64_t start = now_ns();
  autotune::detail::take_reused();
  // A oneDNN primitive takes the creating thread's OpenMP count, which may lag the key's until
  // the thread's next sync (a forked child's first op; another thread's change).
  if (device.is_cpu()) sync_threads();
  std::shared_ptr<void> state = prepare(ctx);
  const bool reused = autotune::detail::take_reused();
  if (state) ledger.add(reused ? Counter::AutotuneHits : Counter::Autotunes, 1);
  // A setup made inside this one (the RNN setup a kernel's state shares) counted its own time
  // and bytes.
  const int64_t elapsed = now_ns() - start, nested_ns = t_nested.ns - before.ns;
  ledger.add(Counter::AutotuneNs, elapsed - nested_ns);
  if (ledger.profiling()) ledger.record({key.op->name, "autotune", start, elapsed});
  // Freed blocks and other threads' allocations make the heap's growth a measure, not an
  // account: it is never below the entry's own bookkeeping.
  const size_t nested_bytes = t_nested.bytes - before.bytes;
  size_t bytes = 0;
  if (state && heap_before) {
    const size_t heap_after = *meter.read(/*always=*/true);
    bytes = heap_after > *heap_before + nested_bytes ? heap_after - *heap_before - nested_bytes : 0;
    meter.record(key.op, bytes);
  } else if (state) {
    bytes = meter.estimate(key.op);
  }
  if (state && device.is_cuda())
    bytes += static_cast<size_t>(
        std::max<int64_t>(0, ledger.get(Counter::BytesAllocated) - device_before));
  bytes += kEntryOverhead;
  t_nested = {before.bytes + nested_bytes + bytes, before.ns + elapsed};
  lru_.push_front({key, state, bytes});
  index_.emplace(std::move(key), lru_.begin());
  bytes_ += bytes;
  trim(g_limit.load());
  return state;
}

void Cache::trim(size_t limit) {
  while (bytes_ > limit && !lru_.empty()) {
    bytes_ -= lru_.back().bytes;
    index_.erase(lru_.back().key);
    lru_.pop_back();
    Ledger::global().add(Counter::PreparedEvictions, 1);
  }
}

std::shared_ptr<void> lookup(const OpDef& def, Device device, const KernelCtx& ctx,
                             PrepareFn prepare, StateUser user) {
  Key key = key_of(def, device, ctx, user);
  Current& c = current();
  std::lock_guard lock(c.mutex);
  std::shared_ptr<void> state = c.cache->get(std::move(key), device, ctx, prepare);
  publish(*c.cache);
  return state;
}

// release_cached_memory() (core/allocator.h) empties the cache too; oneDNN's own cache is off.
[[maybe_unused]] const bool g_configured = [] {
  on_release_cached_memory(clear_prepared);
  cpu::configure_onednn_primitive_cache();
  return true;
}();

}  // namespace

std::shared_ptr<void> prepared_state(const OpDef& def, Device device, const KernelCtx& ctx,
                                     StateUser user) {
  const Kernel& kernel = def.kernels[static_cast<int>(device.type)];
  if (!kernel.prepare || (kernel.wants_state && !kernel.wants_state(ctx))) return nullptr;
  return lookup(def, device, ctx, kernel.prepare, user);
}

std::shared_ptr<void> prepared_setup(const OpDef& def, Device device,
                                     std::span<const TensorRef> tensors, const Attrs& attrs,
                                     PrepareFn make) {
  return lookup(def, device, KernelCtx{tensors, {}, attrs, nullptr, def.name}, make,
                StateUser::Graph);
}

void set_prepared_limit(size_t bytes) {
  Current& c = current();
  std::lock_guard lock(c.mutex);
  g_limit.store(bytes);
  c.cache->trim(bytes);
  publish(*c.cache);
}

size_t prepared_limit() { return g_limit.load(); }

size_t prepared_bytes() {
  Current& c = current();
  std::lock_guard lock(c.mutex);
  return c.cache->bytes();
}

size_t prepared_size() {
  Current& c = current();
  std::lock_guard lock(c.mutex);
  return c.cache->size();
}

void clear_prepared() {
  Current& c = current();
  std::lock_guard lock(c.mutex);
  c.cache->clear();
  publish(*c.cache);
  cpu::flush_onednn_primitive_cache();
}

PerShapeState swap_per_shape_state(PerShapeState state) {
  Current& c = current();
  std::lock_guard lock(c.mutex);
  PerShapeState previous{c.cache, autotune::detail::swap_choices(std::move(state.choices))};
  c.cache =
      state.prepared ? std::static_pointer_cast<Cache>(state.prepared) : std::make_shared<Cache>();
  c.cache->trim(g_limit.load());
  publish(*c.cache);
  // oneDNN's own cache (off unless the environment turns it on) cannot be swapped.
  cpu::flush_onednn_primitive_cache();
  return previous;
}

}  // namespace encore
