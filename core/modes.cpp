#include "core/modes.h"

#include <atomic>
#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#define ENCORE_HAS_MXCSR 1
#endif

#include "core/device.h"
#include "core/error.h"

namespace encore {

namespace {
thread_local bool g_training = true;
thread_local bool g_tracing = false;
thread_local ModeFlagObserver* g_flag_observer = nullptr;
std::atomic<bool> g_allow_tf32{false};
std::atomic<bool> g_flush_denormal{true};
}  // namespace

thread_local bool GradMode::enabled_ = true;

bool tracing() { return g_tracing; }
void set_tracing(bool on) { g_tracing = on; }
bool training() { return g_training; }
void set_training(bool on) { g_training = on; }
ModeFlagObserver* mode_flag_observer() { return g_flag_observer; }
void set_mode_flag_observer(ModeFlagObserver* observer) { g_flag_observer = observer; }
bool ModeFlag::read() const {
  if (g_flag_observer) g_flag_observer->on_flag_read(shared_from_this(), on_);
  return on_;
}
uint64_t Generation::read() const {
  if (g_flag_observer) g_flag_observer->on_generation_read(shared_from_this(), count_);
  return count_;
}
bool allow_tf32() { return g_allow_tf32.load(std::memory_order_relaxed); }
void set_allow_tf32(bool on) { g_allow_tf32.store(on, std::memory_order_relaxed); }
bool flush_denormal() { return g_flush_denormal.load(std::memory_order_relaxed); }
void set_flush_denormal(bool on) { g_flush_denormal.store(on, std::memory_order_relaxed); }

#ifdef ENCORE_HAS_MXCSR
// FTZ (bit 15) flushes subnormal results, DAZ (bit 6) treats subnormal inputs as zero.
constexpr unsigned kFlushBits = 0x8040;
DenormalScope::DenormalScope() : saved_(_mm_getcsr()) {
  const unsigned want = flush_denormal() ? (saved_ | kFlushBits) : saved_;
  if (want != saved_) {
    _mm_setcsr(want);
    changed_ = true;
  }
}
DenormalScope::~DenormalScope() {
  if (changed_) _mm_setcsr(saved_);
}
void set_thread_flush_denormal(bool on) {
  const unsigned csr = _mm_getcsr();
  _mm_setcsr(on ? (csr | kFlushBits) : (csr & ~kFlushBits));
}
#else
DenormalScope::DenormalScope() : saved_(0) {}
DenormalScope::~DenormalScope() = default;
void set_thread_flush_denormal(bool) {}
#endif

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

}  // namespace encore
