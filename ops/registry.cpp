#include "ops/registry.h"

#include <deque>
#include <map>
#include <memory>
#include <mutex>

#include "core/backend.h"

namespace encore {

namespace {

struct Registry {
  std::recursive_mutex mutex;
  std::deque<OpDef> defs;  // stable addresses
  std::vector<OpDef*> order;
  std::map<std::string, OpDef*, std::less<>> by_name;
  std::map<const OpDef*, std::unique_ptr<Signature>> signatures;
  // Kernels registered before their op (static initialization runs in any order).
  std::multimap<std::string, std::pair<DeviceType, Kernel>, std::less<>> pending;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: ops run during static destruction
  return *r;
}

}  // namespace

OpDef& define_op(OpDef&& def) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  ENCORE_CHECK(def.name && !r.by_name.count(def.name), ValueError, "[registry] op '",
               def.name ? def.name : "(null)", "' is defined twice");
  OpDef& d = r.defs.emplace_back(std::move(def));
  d.id = static_cast<uint16_t>(r.order.size());
  d.kernels[static_cast<int>(DeviceType::CPU)] = d.cpu;
  const auto [first, last] = r.pending.equal_range(std::string_view(d.name));
  for (auto it = first; it != last; ++it)
    d.kernels[static_cast<int>(it->second.first)] = it->second.second;
  r.pending.erase(first, last);
  r.order.push_back(&d);
  r.by_name.emplace(d.name, &d);
  if (d.signature) {
    auto sig = std::make_unique<Signature>(Signature::parse(d.signature));
    ENCORE_CHECK(sig->name == d.name, ValueError, "[registry] op '", d.name,
                 "' has the signature of '", sig->name, "'");
    r.signatures.emplace(&d, std::move(sig));
  }
  return d;
}

bool register_kernel(const char* op, DeviceType backend, Kernel kernel) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  if (auto it = r.by_name.find(op); it != r.by_name.end())
    it->second->kernels[static_cast<int>(backend)] = kernel;
  else
    r.pending.emplace(op, std::make_pair(backend, kernel));
  return true;
}

const OpDef* find_op(std::string_view name) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  const auto it = r.by_name.find(name);
  return it == r.by_name.end() ? nullptr : it->second;
}

const OpDef& op(std::string_view name) {
  const OpDef* d = find_op(name);
  // CUDA-only ops come with the CUDA plugin, which loads on first need.
  if (!d && backend(DeviceType::CUDA)) d = find_op(name);
  ENCORE_CHECK(
      d, UnsupportedError, "[", name, "] is not available in this build",
      cuda_built() ? "" : " (it needs the CUDA backend: " + backend_status(DeviceType::CUDA) + ")");
  return *d;
}

std::span<OpDef* const> all_ops() {
  (void)backend(DeviceType::CUDA);  // the CUDA plugin's ops are listed too
  return defined_ops();
}

std::span<OpDef* const> defined_ops() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  return r.order;
}

const Signature& signature_of(const OpDef& def) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  const auto it = r.signatures.find(&def);
  ENCORE_CHECK(it != r.signatures.end(), ValueError, "[", def.name, "] has no public signature");
  return *it->second;
}

const OpDef* fused_recurrence_op(RecurrentCell cell, DeviceType type) {
  if (cell == RecurrentCell::None) return nullptr;
  // The plugin's rows are asked for only for CUDA (whose tensors have loaded it already): a CPU
  // layer must not load the CUDA libraries (tests/python/test_cuda_plugin.py).
  for (const OpDef* def : type == DeviceType::CUDA ? all_ops() : defined_ops())
    if (def->fused_cell == cell && def->backends && def->runs_on(type)) return def;
  return nullptr;
}

std::vector<std::string> orphan_kernels() {
  (void)backend(DeviceType::CUDA);
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  std::vector<std::string> names;
  for (const auto& [name, kernel] : r.pending) names.push_back(name);
  return names;
}

void Attrs::wrong_type() {
  throw Error("[attrs] an op was called with attributes of another op (an internal error)");
}

}  // namespace encore
