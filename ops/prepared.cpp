#include "ops/prepared.h"

#include <atomic>
#include <list>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/ledger.h"
#include "core/modes.h"
#include "core/threads.h"
#include "ops/autotune.h"

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
  Attrs attrs;
  size_t hash;
  bool operator==(const Key& o) const {
    return hash == o.hash && op == o.op && device == o.device && tf32 == o.tf32 &&
           threads == o.threads && user == o.user && generation == o.generation &&
           tensors == o.tensors && attrs == o.attrs;
  }
};

struct KeyHash {
  size_t operator()(const Key& k) const { return k.hash; }
};

// The hash covers the op and the geometry; calls that differ only in attributes share a bucket
// and are told apart by equality.
// A number for the calling thread, never 0 and never reused.
uint64_t thread_number() {
  static std::atomic<uint64_t> next{1};
  thread_local const uint64_t number = next.fetch_add(1, std::memory_order_relaxed);
  return number;
}

Key key_of(const OpDef& def, Device device, const KernelCtx& ctx, StateUser user) {
  const bool cpu = device.type == DeviceType::CPU;
  const uint64_t owner = cpu || user == StateUser::Graph ? 0 : thread_number();
  Key k{&def, device, allow_tf32(), cpu ? num_threads() : 0, owner, autotune::detail::generation(), {},
        ctx.attrs, 0};
  size_t h = std::hash<const void*>()(&def) ^ (static_cast<size_t>(device.type) << 8 | static_cast<size_t>(device.index));
  h ^= static_cast<size_t>(k.user) * 0x9e3779b97f4a7c15ull;
  auto mix = [&h](int64_t v) { h = (h ^ static_cast<size_t>(v)) * 0x100000001b3ull; };
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

class Cache {
 public:
  std::shared_ptr<void> get(const OpDef& def, Device device, const KernelCtx& ctx,
                            PrepareFn prepare, StateUser user) {
    Key key = key_of(def, device, ctx, user);
    Ledger& ledger = Ledger::global();
    std::lock_guard lock(mutex_);
    // A shape that needs no state (a small Dense on the BLAS path) is neither searched nor
    // reused: the autotune counters count what was.
    if (auto it = index_.find(key); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      if (it->second->second) ledger.add(Counter::AutotuneHits, 1);
      return it->second->second;
    }
    std::shared_ptr<void> state;
    {
      ScopedTimer timer(Counter::AutotuneNs, "autotune", def.name);
      autotune::detail::take_reused();
      // A oneDNN primitive takes the creating thread's OpenMP count, which may lag the key's
      // until the thread's next sync (a forked child's first op; another thread's change).
      if (device.is_cpu()) sync_threads();
      state = prepare(ctx);
      const bool reused = autotune::detail::take_reused();
      if (state) ledger.add(reused ? Counter::AutotuneHits : Counter::Autotunes, 1);
    }
    lru_.emplace_front(key, state);
    index_.emplace(std::move(key), lru_.begin());
    trim();
    return state;
  }
  void set_capacity(size_t n) {
    std::lock_guard lock(mutex_);
    capacity_ = n;
    trim();
  }
  size_t capacity() {
    std::lock_guard lock(mutex_);
    return capacity_;
  }
  size_t size() {
    std::lock_guard lock(mutex_);
    return lru_.size();
  }
  void clear() {
    std::lock_guard lock(mutex_);
    index_.clear();
    lru_.clear();
  }

 private:
  void trim() {
    while (lru_.size() > capacity_) {
      index_.erase(lru_.back().first);
      lru_.pop_back();
      Ledger::global().add(Counter::PreparedEvictions, 1);
    }
  }

  std::mutex mutex_;
  size_t capacity_ = 512;
  std::list<std::pair<Key, std::shared_ptr<void>>> lru_;  // most recently used first
  std::unordered_map<Key, decltype(lru_)::iterator, KeyHash> index_;
};

Cache& cache() {
  static Cache* c = new Cache();  // never destroyed: kernels may run during static destruction
  return *c;
}

}  // namespace

std::shared_ptr<void> prepared_state(const OpDef& def, Device device, const KernelCtx& ctx,
                                     StateUser user) {
  const PrepareFn prepare = def.kernels[static_cast<int>(device.type)].prepare;
  if (!prepare) return nullptr;
  return cache().get(def, device, ctx, prepare, user);
}

void set_prepared_capacity(size_t entries) { cache().set_capacity(entries); }
size_t prepared_capacity() { return cache().capacity(); }
size_t prepared_size() { return cache().size(); }
void clear_prepared() { cache().clear(); }

}  // namespace encore
