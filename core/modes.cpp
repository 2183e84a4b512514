#include "core/modes.h"

#include <atomic>

#include "autograd/grad_mode.h"
#include "core/device.h"
#include "core/error.h"
#if ENCORE_CUDA
#include "core/cuda/runtime.h"
#endif

namespace encore {

namespace {
thread_local bool g_training = true;
std::atomic<bool> g_allow_tf32{false};
}  // namespace

thread_local bool GradMode::enabled_ = true;

bool training() { return g_training; }
void set_training(bool on) { g_training = on; }
bool allow_tf32() { return g_allow_tf32.load(std::memory_order_relaxed); }
void set_allow_tf32(bool on) { g_allow_tf32.store(on, std::memory_order_relaxed); }

Device parse_device(const std::string& s) {
  if (s == "cpu") return Device::cpu();
  if (s == "cuda") return Device::cuda(0);
  if (s.rfind("cuda:", 0) == 0) {
    try {
      return Device::cuda(std::stoi(s.substr(5)));
    } catch (const std::exception&) {
    }
  }
  throw DeviceError("[device] cannot parse device '" + s + "' (expected cpu, cuda or cuda:N)");
}

#if ENCORE_CUDA
int cuda_device_count() { return cuda::device_count(); }
bool cuda_built() { return true; }
void synchronize(Device device) {
  if (device.is_cuda()) cuda::synchronize(device.index);
}
#else
int cuda_device_count() { return 0; }
bool cuda_built() { return false; }
void synchronize(Device) {}
#endif

}  // namespace encore
