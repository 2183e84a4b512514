#include "core/backend.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "core/error.h"

namespace encore {

namespace {

struct Slot {
  Backend* backend = nullptr;
  std::atomic<bool> tried{false};
  bool loading = false;
  std::string status;
};

struct Backends {
  // Recursive: loading runs the plugin's static initializers, which call register_backend (and
  // may ask for the backend) on the loading thread.
  std::recursive_mutex mutex;
  Slot slots[kNumDeviceTypes];
};

Backends& backends() {
  static Backends* b =
      new Backends();  // never destroyed: storage is freed during static destruction
  return *b;
}

void load_cuda_plugin(Slot& slot) {
  const std::string path = cuda_plugin_path();
  if (path.empty()) {
    slot.status = "this build has no CUDA backend: it was configured with ENCORE_CUDA=OFF";
    return;
  }
  if (!std::filesystem::exists(path)) {
    slot.status = "no CUDA plugin: " + path + " not found";
    return;
  }
  // Never closed: the plugin's kernels stay in the registry for the life of the process.
  if (!dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
    const char* error = dlerror();
    slot.status =
        "the CUDA plugin " + path + " failed to load: " + (error ? error : "unknown error");
    return;
  }
  if (!slot.backend) slot.status = "the CUDA plugin " + path + " loaded but registered no backend";
}

}  // namespace

bool register_backend(DeviceType type, Backend& backend) {
  Backends& b = backends();
  std::lock_guard lock(b.mutex);
  b.slots[static_cast<int>(type)].backend = &backend;
  return true;
}

Backend* backend(DeviceType type) {
  Backends& b = backends();
  Slot& slot = b.slots[static_cast<int>(type)];
  if (slot.tried.load(std::memory_order_acquire)) return slot.backend;
  std::lock_guard lock(b.mutex);
  if (!slot.tried && !slot.loading) {
    slot.loading = true;
    if (type == DeviceType::CUDA) load_cuda_plugin(slot);  // the CPU runs inside libencore
    slot.loading = false;
    slot.tried.store(true, std::memory_order_release);
  }
  return slot.backend;
}

Backend* loaded_backend(DeviceType type) {
  const Slot& slot = backends().slots[static_cast<int>(type)];
  return slot.tried.load(std::memory_order_acquire) ? slot.backend : nullptr;
}

Backend& require_backend(Device device, const char* op) {
  Backend* b = backend(device.type);
  ENCORE_CHECK(b, DeviceError, "[", op, "] device ", device.str(),
               " is not available: ", backend_status(device.type));
  return *b;
}

std::string backend_status(DeviceType type) {
  if (backend(type)) return {};
  Backends& b = backends();
  std::lock_guard lock(b.mutex);
  return b.slots[static_cast<int>(type)].status;
}

std::string cuda_plugin_path() {
#ifdef ENCORE_CUDA_PLUGIN
  if (const char* path = std::getenv("ENCORE_CUDA_PLUGIN"); path && *path) return path;
  Dl_info self{};
  if (dladdr(reinterpret_cast<void*>(&cuda_plugin_path), &self) && self.dli_fname)
    return (std::filesystem::path(self.dli_fname).parent_path() / ENCORE_CUDA_PLUGIN).string();
  return ENCORE_CUDA_PLUGIN;
#else
  return {};
#endif
}

int cuda_device_count() {
  Backend* b = backend(DeviceType::CUDA);
  return b ? b->device_count() : 0;
}

bool cuda_built() { return backend(DeviceType::CUDA) != nullptr; }

void synchronize(Device device) {
  if (device.is_cuda()) require_backend(device, "synchronize").synchronize(device.index);
}

std::string cuda::unavailable_reason() {
  Backend* b = backend(DeviceType::CUDA);
  return b ? b->no_device_reason() : backend_status(DeviceType::CUDA);
}

}  // namespace encore
