// Device backends beyond the CPU, loaded at run time. The CUDA backend is a plugin of its own,
// libencore_cuda.so next to libencore.so, which links the CUDA libraries (libencore links
// none). libencore loads it with dlopen on first need (a CUDA device, a CUDA-only op, the op
// list, show_config); loading runs the plugin's static initializers, which register its
// kernels by op name (ops/registry.h), its runtime here, and its CUDA Graph capture
// (graph/device_graph.h). A machine without the plugin, the CUDA libraries, a driver or a GPU
// runs everything on the CPU, and cuda::unavailable_reason() says which was missing.
#pragma once

#include "core/cxx20.h"

#include <cstdint>
#include <functional>
#include <string>

#include "core/allocator.h"
#include "core/device.h"

namespace encore {

/// What the core asks of a device backend's runtime.
class Backend {
 public:
  virtual ~Backend() = default;
  /// Devices present (0 when there is no driver or no device; never throws).
  virtual int device_count() = 0;
  /// Why device_count() is 0, e.g. "no CUDA driver found"; empty when devices are present.
  virtual std::string no_device_reason() = 0;
  /// The allocator of `device`; throws DeviceError when it is not present.
  virtual Allocator& allocator(int device) = 0;
  virtual void synchronize(int device) = 0;
  /// The stream the calling thread queues work for `device` on (a cudaStream_t), which DLPack
  /// producers order their pending work before.
  virtual void* stream(int device) = 0;
  /// Makes the compute stream of `device` wait, without blocking the host, for the work queued
  /// so far on another library's `stream` (as DLPack numbers them: 1 the legacy default stream,
  /// 2 the calling thread's per-thread default stream, else a cudaStream_t); memory a DLPack
  /// consumer read is then freed after its reads. Never throws (destructors call it).
  virtual void wait_for_stream(int device, uintptr_t stream) noexcept = 0;
  /// Blocks until the work queued so far on the compute stream of `device` has run: memory a
  /// DLPack producer lent is handed back only after encore's kernels are done with it. Never
  /// throws (destructors call it).
  virtual void drain(int device) noexcept = 0;
  /// Runs `launch` (which queues a kernel) and adds its device time to the ledger (profiling).
  virtual void time_kernel(int device, const char* name, const std::function<void()>& launch) = 0;
  /// show_config's lines: the backend's libraries as loaded, and its devices.
  virtual std::string describe_libraries() = 0;
  virtual std::string describe_devices() = 0;
  /// The version of the library whose algorithm choices the autotune store keeps (cuDNN).
  virtual size_t autotune_library_version() = 0;
  /// Hands the memory its allocators keep for reuse back to the driver.
  virtual void release_cached_memory() = 0;
};

/// Called once by a backend plugin's static initializer; returns true.
bool register_backend(DeviceType type, Backend& backend);

/// The backend of `type`, loading its plugin on the first call; null when it could not be
/// loaded (backend_status says why).
Backend* backend(DeviceType type);

/// The backend of `type` if its plugin is loaded already; never loads it.
Backend* loaded_backend(DeviceType type);

/// The backend that runs `device`; throws DeviceError naming `op` and the reason when it is
/// absent.
Backend& require_backend(Device device, const char* op);

/// Why backend(type) is null: "this build has no CUDA backend: ...ENCORE_CUDA=OFF", "no CUDA
/// plugin: <path> not found", "the CUDA plugin <path> failed to load: <dlerror>"; empty once
/// it is loaded.
std::string backend_status(DeviceType type);

/// Where libencore looks for the CUDA plugin: $ENCORE_CUDA_PLUGIN when set, else
/// libencore_cuda.so in libencore's own folder (empty in a build without the CUDA backend).
std::string cuda_plugin_path();

}  // namespace encore
