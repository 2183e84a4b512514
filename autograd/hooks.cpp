#include "autograd/hooks.h"

#include <atomic>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/error.h"

namespace encore::autograd {

namespace {

struct Hook {
  uint64_t id;
  std::function<void()> fn;
};

struct Hooks {
  std::mutex mutex;
  std::unordered_map<const TensorImpl*, std::vector<Hook>> by_leaf;
  std::atomic<size_t> count{0};
  uint64_t next_id = 1;
};

Hooks& hooks() {
  static Hooks* h = new Hooks();  // never destroyed: optimizers may remove hooks during exit
  return *h;
}

}  // namespace

uint64_t add_grad_ready_hook(const Tensor& leaf, std::function<void()> fn) {
  ENCORE_CHECK(leaf.defined() && leaf.is_leaf() && leaf.requires_grad(), ValueError,
               "[add_grad_ready_hook] needs a leaf tensor that requires grad");
  Hooks& h = hooks();
  std::lock_guard lock(h.mutex);
  const uint64_t id = h.next_id++;
  h.by_leaf[leaf.impl()].push_back({id, std::move(fn)});
  h.count.fetch_add(1);
  return id;
}

void remove_grad_ready_hook(uint64_t id) {
  Hooks& h = hooks();
  std::lock_guard lock(h.mutex);
  for (auto it = h.by_leaf.begin(); it != h.by_leaf.end(); ++it) {
    std::vector<Hook>& v = it->second;
    for (auto k = v.begin(); k != v.end(); ++k) {
      if (k->id != id) continue;
      v.erase(k);
      if (v.empty()) h.by_leaf.erase(it);
      h.count.fetch_sub(1);
      return;
    }
  }
}

namespace detail {

bool any_grad_ready_hooks() { return hooks().count.load(std::memory_order_relaxed) != 0; }

bool has_grad_ready_hooks(const TensorImpl* leaf) {
  Hooks& h = hooks();
  std::lock_guard lock(h.mutex);
  return h.by_leaf.contains(leaf);
}

void run_grad_ready_hooks(const TensorImpl* leaf) {
  std::vector<std::function<void()>> fns;
  {
    Hooks& h = hooks();
    std::lock_guard lock(h.mutex);
    const auto it = h.by_leaf.find(leaf);
    if (it == h.by_leaf.end()) return;
    for (const Hook& k : it->second) fns.push_back(k.fn);
  }
  for (const auto& fn : fns) fn();  // outside the lock: a hook may add or remove hooks
}

}  // namespace detail

}  // namespace encore::autograd
