// Devices, the compute stream of each device, the stream-ordered pool allocator, capture
// scopes, kernel timing, and the kernel error word. Per-device state is created on first use.
#include "core/cuda/runtime.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/cuda/check.h"
#include "core/cuda/device_state.h"
#include "core/error.h"
#include "core/ledger.h"

namespace encore::cuda {

namespace {

constexpr int kMaxDevices = 128;  // Device::index is an int8_t

// Never destroyed: the states own streams, pools and library handles, and releasing those from
// static destructors races the CUDA runtime's own teardown at process exit.
std::atomic<DeviceState*> g_states[kMaxDevices] = {};
std::once_flag g_state_once[kMaxDevices];

// The calling thread's capture (CaptureScope), if any.
thread_local const CaptureScope* t_capture = nullptr;

void create_state(int device) {
  auto s = std::make_unique<DeviceState>();
  s->index = device;
  DeviceGuard guard(device);
  cudaStream_t stream = nullptr;
  ENCORE_CUDA_CHECK("cuda", cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  s->stream = Stream(stream);
  // A pool of our own: the device's default pool is shared with every library in the process
  // (PyTorch, CuPy), and its settings are theirs.
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypeNone;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  ENCORE_CUDA_CHECK("cuda", cudaMemPoolCreate(&s->pool, &props));
  // Keep freed memory cached in the pool instead of returning it to the driver at every
  // synchronization: eager steps free and reallocate the same sizes over and over.
  uint64_t keep = std::numeric_limits<uint64_t>::max();
  ENCORE_CUDA_CHECK("cuda",
                    cudaMemPoolSetAttribute(s->pool, cudaMemPoolAttrReleaseThreshold, &keep));
  void* word = nullptr;
  ENCORE_CUDA_CHECK("cuda", cudaHostAlloc(&word, sizeof(int), cudaHostAllocMapped));
  s->error_host = static_cast<int*>(word);
  *s->error_host = 0;
  void* word_device = nullptr;
  ENCORE_CUDA_CHECK("cuda", cudaHostGetDevicePointer(&word_device, word, 0));
  s->error_device = static_cast<int*>(word_device);
  cudaDeviceProp prop{};
  ENCORE_CUDA_CHECK("cuda", cudaGetDeviceProperties(&prop, device));
  s->sm_count = prop.multiProcessorCount;
  s->total_memory = prop.totalGlobalMem;
  s->model = detail::cat(prop.name, " sm_", prop.major, prop.minor);
  g_states[device].store(s.release(), std::memory_order_release);
}

std::string gib(uint64_t bytes) {
  return detail::cat(static_cast<double>(bytes) / (1 << 30), " GiB");
}

std::string oom_message(DeviceState& s, size_t nbytes) {
  uint64_t reserved = 0, used = 0;
  size_t free_bytes = 0, total = 0;
  if (cudaMemPoolGetAttribute(s.pool, cudaMemPoolAttrReservedMemCurrent, &reserved) !=
          cudaSuccess ||
      cudaMemPoolGetAttribute(s.pool, cudaMemPoolAttrUsedMemCurrent, &used) != cudaSuccess ||
      cudaMemGetInfo(&free_bytes, &total) != cudaSuccess)
    (void)cudaGetLastError();
  return detail::cat("[alloc] out of memory on cuda:", s.index, ": cannot allocate ", nbytes,
                     " bytes (", gib(nbytes), "); encore's pool holds ", gib(reserved), ", ",
                     gib(used), " of it in use; the device has ", gib(free_bytes), " free of ",
                     gib(total));
}

}  // namespace

// ---- devices -----------------------------------------------------------------------------

// CUDA does not survive fork(): in a child of a process that initialized it, every call fails.
std::atomic<bool> g_initialized{false}, g_forked_after_init{false};
const int g_fork_handler = pthread_atfork(nullptr, nullptr, [] {
  if (g_initialized.load(std::memory_order_relaxed))
    g_forked_after_init.store(true, std::memory_order_relaxed);
});

int device_count() {
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      (void)cudaGetLastError();  // no driver, or no device: not an error for a CPU run
      return 0;
    }
    g_initialized.store(n > 0, std::memory_order_relaxed);
    return std::min(n, kMaxDevices);
  }();
  return count;
}

void require_device(int device) {
  ENCORE_CHECK(
      !g_forked_after_init.load(std::memory_order_relaxed), DeviceError, "[cuda] cuda:", device,
      " cannot be used in a process forked after its parent initialized CUDA (CUDA does not "
      "survive fork()); start the process with multiprocessing's 'spawn' or 'forkserver' "
      "method");
  const int n = device_count();
  ENCORE_CHECK(device >= 0 && device < n, DeviceError, "[cuda] device cuda:", device,
               " is not present (",
               n == 0 ? std::string("no CUDA device or driver was found")
                      : detail::cat(n, " CUDA device(s) found"),
               ")");
}

DeviceState& device_state(int device) {
  require_device(device);
  std::call_once(g_state_once[device], create_state, device);
  return *g_states[device].load(std::memory_order_acquire);
}

DeviceGuard::DeviceGuard(int device) {
  int current = -1;
  ENCORE_CUDA_CHECK("cuda", cudaGetDevice(&current));
  if (current != device) {
    ENCORE_CUDA_CHECK("cuda", cudaSetDevice(device));
    previous_ = current;
  }
}

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0 && cudaSetDevice(previous_) != cudaSuccess) (void)cudaGetLastError();
}

DeviceState* capturing_state(int device) {
  const CaptureScope* c = t_capture;
  if (!c) [[likely]]
    return nullptr;
  ENCORE_CHECK(c->device() == device, UnsupportedError, "[", c->op(), "] runs on cuda:", device,
               " while a CUDA Graph of cuda:", c->device(),
               " is being captured; a graph replays on one GPU: move tensors between GPUs outside "
               "the traced function");
  return &device_state(device);
}

cudaStream_t stream(int device) {
  if (DeviceState* c = capturing_state(device)) return c->capture_stream.get();
  return device_state(device).stream.get();
}

void synchronize(int device) {
  DeviceState& s = device_state(device);
  ENCORE_CUDA_CHECK("synchronize", cudaStreamSynchronize(s.stream.get()));
  raise_kernel_errors(device);
}

namespace {
// The state of `device` if encore has used it (and not in a child forked after that); null
// otherwise. Never throws.
DeviceState* used_state(int device) noexcept {
  if (device < 0 || device >= kMaxDevices || g_forked_after_init.load(std::memory_order_relaxed))
    return nullptr;
  return g_states[device].load(std::memory_order_acquire);
}
}  // namespace

void wait_for_stream(int device, uintptr_t stream) noexcept {
  DeviceState* s = used_state(device);
  if (!s) return;  // nothing of encore's runs there
  const auto other = stream == 1   ? cudaStreamLegacy
                     : stream == 2 ? cudaStreamPerThread
                                   : reinterpret_cast<cudaStream_t>(stream);
  // The default streams are the current device's: make it `device` (DeviceGuard may throw).
  int previous = -1;
  if (cudaGetDevice(&previous) != cudaSuccess ||
      (previous != device && cudaSetDevice(device) != cudaSuccess))
    previous = -1;
  cudaEvent_t e = nullptr;
  const bool ordered = cudaEventCreateWithFlags(&e, cudaEventDisableTiming) == cudaSuccess &&
                       cudaEventRecord(e, other) == cudaSuccess &&
                       cudaStreamWaitEvent(s->stream.get(), e, 0) == cudaSuccess;
  if (e) (void)cudaEventDestroy(e);  // the wait holds on to what it needs of the event
  if (!ordered) {
    // The streams could not be ordered: wait on the host instead, for the whole device.
    (void)cudaGetLastError();
    if (cudaDeviceSynchronize() != cudaSuccess) (void)cudaGetLastError();
  }
  if (previous >= 0 && previous != device && cudaSetDevice(previous) != cudaSuccess)
    (void)cudaGetLastError();
}

void drain(int device) noexcept {
  DeviceState* s = used_state(device);
  if (!s) return;
  if (cudaStreamSynchronize(s->stream.get()) != cudaSuccess) (void)cudaGetLastError();
}

bool capturing() {
  return t_capture != nullptr && t_capture->mode() == CaptureScope::Mode::Capture;
}

// ---- graph capture -----------------------------------------------------------------------

// Why a stream of its own rather than capturing the compute stream: capture records whatever
// any thread queues on the captured stream, so another thread's eager work on the compute
// stream would land in the graph (and be missing from that thread's results). Only the
// capturing thread ever sees the capture stream (stream() returns it to that thread alone),
// which makes capture safe without making every eager op take a lock. Nothing executes on the
// capture stream during a capture, so a capture needs no event joins with the compute stream:
// the graph is uploaded and launched on the compute stream, ordered after the work queued
// there before. A warm-up does execute there, so it joins the streams.
CaptureScope::CaptureScope(int device, Mode mode) : state_(device_state(device)), mode_(mode) {
  ENCORE_CHECK(!t_capture, UnsupportedError, "[capture] cuda:", device,
               " cannot be captured or warmed up while this thread captures or warms up cuda:",
               t_capture ? t_capture->device() : -1);
  lock_ = std::unique_lock<std::mutex>(state_.capture_mutex);
  std::call_once(state_.capture_once, create_capture_handles, std::ref(state_));
  if (mode_ == Mode::WarmUp) {
    const cudaEvent_t queued = state_.capture_joins[0].get();
    ENCORE_CUDA_CHECK("warm-up", cudaEventRecord(queued, state_.stream.get()));
    ENCORE_CUDA_CHECK("warm-up", cudaStreamWaitEvent(state_.capture_stream.get(), queued, 0));
  }
  t_capture = this;
}

CaptureScope::~CaptureScope() {
  t_capture = nullptr;
  if (mode_ != Mode::WarmUp) return;
  // The compute stream waits for the warm-up, so that the scratch memory it used is freed
  // (stream-ordered, on the compute stream) only after it. Should the join fail, the host
  // waits instead: a destructor cannot throw.
  const cudaEvent_t done = state_.capture_joins[1].get();
  if (cudaEventRecord(done, state_.capture_stream.get()) != cudaSuccess ||
      cudaStreamWaitEvent(state_.stream.get(), done, 0) != cudaSuccess) {
    (void)cudaGetLastError();
    if (cudaStreamSynchronize(state_.capture_stream.get()) != cudaSuccess) (void)cudaGetLastError();
  }
}

cudaStream_t CaptureScope::stream() const { return state_.capture_stream.get(); }
int CaptureScope::device() const { return state_.index; }

int multiprocessor_count(int device) { return device_state(device).sm_count; }
const std::string& device_model(int device) { return device_state(device).model; }

size_t free_memory(int device) {
  DeviceGuard guard(device);
  size_t free_bytes = 0, total = 0;
  if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return free_bytes;
}

Event make_event(bool timing) {
  cudaEvent_t e = nullptr;
  ENCORE_CUDA_CHECK(
      "cuda", cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
  return Event(e);
}

// ---- memory ------------------------------------------------------------------------------

void* PoolAllocator::allocate(size_t nbytes, Device device) {
  if (nbytes == 0) return nullptr;
  // Memory allocated during a capture would either become an allocation node of the graph
  // (which needs a matching free node, or the second replay fails) or, as here, be real memory
  // freed after the capture while the graph keeps using it: refuse it, naming the op.
  if (const CaptureScope* c = t_capture) {
    if (c->mode() == CaptureScope::Mode::Capture)
      throw UnsupportedError(detail::cat(
          "[", c->op(), "] allocates ", nbytes, " bytes on cuda:", device.index,
          " while being captured into a CUDA Graph, which no replay could repeat; its memory must "
          "be allocated before the capture (the op's prepared state)"));
    throw UnsupportedError(detail::cat(
        "[", c->op(), "] allocates ", nbytes, " bytes on cuda:", device.index,
        " while warming up on the capture stream, as its capture would; its memory must be "
        "allocated before the warm-up (the op's prepared state)"));
  }
  DeviceState& s = device_state(device.index);
  DeviceGuard guard(device.index);
  void* p = nullptr;
  cudaError_t e = cudaMallocFromPoolAsync(&p, nbytes, s.pool, s.stream.get());
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    // Memory cached by the pool in blocks of other sizes may be what is missing: wait for the
    // pending frees, hand the unused part of the pool back to the driver, and try once more.
    if (cudaStreamSynchronize(s.stream.get()) == cudaSuccess &&
        cudaMemPoolTrimTo(s.pool, 0) == cudaSuccess)
      e = cudaMallocFromPoolAsync(&p, nbytes, s.pool, s.stream.get());
    else
      (void)cudaGetLastError();
  }
  // A request beyond the device's memory may be refused as an invalid size instead.
  if (e == cudaErrorMemoryAllocation || (e == cudaErrorInvalidValue && nbytes > s.total_memory)) {
    (void)cudaGetLastError();
    throw OutOfMemoryError(oom_message(s, nbytes));
  }
  ENCORE_CUDA_CHECK("alloc", e);
  return p;
}

void PoolAllocator::deallocate(void* ptr, size_t, Device device) {
  if (!ptr) return;
  DeviceState* s =
      g_states[device.index].load(std::memory_order_acquire);  // exists: allocate() created it
  // Stream-ordered: the memory is reused only by work queued after this point, so a buffer
  // can be freed as soon as the last kernel reading it has been queued. The compute stream is
  // never captured, so a free from any thread, also during a capture, is a real free. Errors
  // are ignored (a destructor calls this; at process exit the runtime may already be unloaded).
  if (cudaFreeAsync(ptr, s->stream.get()) != cudaSuccess) (void)cudaGetLastError();
}

Allocator& allocator(int device) { return device_state(device).allocator; }

void release_cached_memory() {
  if (g_forked_after_init.load(std::memory_order_relaxed))
    return;  // nothing of the parent's is usable
  for (const auto& slot : g_states) {
    DeviceState* s = slot.load(std::memory_order_acquire);
    if (!s) continue;  // never used: nothing cached, and no reason to initialize it now
    DeviceGuard guard(s->index);
    // Frees still queued on the stream hold their blocks until they run.
    ENCORE_CUDA_CHECK("release_cached_memory", cudaStreamSynchronize(s->stream.get()));
    ENCORE_CUDA_CHECK("release_cached_memory", cudaMemPoolTrimTo(s->pool, 0));
  }
}

DeviceBuffer::DeviceBuffer(size_t nbytes, int device) : device_(device) {
  data_ = device_state(device).allocator.allocate(nbytes, Device::cuda(device));
  size_ = nbytes;
  if (nbytes == 0) return;
  Ledger::global().add(Counter::Allocations, 1);
  Ledger::global().add(Counter::BytesAllocated, static_cast<int64_t>(nbytes));
}

DeviceBuffer::~DeviceBuffer() {
  if (data_)
    g_states[device_]
        .load(std::memory_order_acquire)
        ->allocator.deallocate(data_, size_, Device::cuda(device_));
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (data_)
      g_states[device_]
          .load(std::memory_order_acquire)
          ->allocator.deallocate(data_, size_, Device::cuda(device_));
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    device_ = o.device_;
  }
  return *this;
}

// ---- kernel errors and timing ------------------------------------------------------------

int* error_flag(int device) { return device_state(device).error_device; }

namespace {
std::mutex g_error_names_mutex;
std::vector<std::string>& error_names() {
  static std::vector<std::string> names;
  return names;
}
const char* error_name(int code) {
  std::lock_guard lock(g_error_names_mutex);
  return code >= 1 && code <= static_cast<int>(error_names().size())
             ? error_names()[code - 1].c_str()
             : "kernel";
}
}  // namespace

int error_code(const char* op) {
  std::lock_guard lock(g_error_names_mutex);
  std::vector<std::string>& names = error_names();
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == op) return static_cast<int>(i) + 1;
  names.emplace_back(op);
  return static_cast<int>(names.size());
}

void raise_kernel_errors(int device) {
  volatile int* word = device_state(device).error_host;
  const int code = *word;
  if (code == 0) return;
  *word = 0;
  const char* name = error_name(code);
  throw ValueError(detail::cat("[", name, "] an index was out of range on cuda:", device,
                               " (detected by the kernel and reported when the device "
                               "synchronized; the entries with bad indices were left as 0)"));
}

void time_on_stream(int device, const char* name, const std::function<void()>& launch) {
  DeviceState& s = device_state(device);
  DeviceGuard guard(device);
  Event start = make_event(true), stop = make_event(true);
  ENCORE_CUDA_CHECK(name, cudaEventRecord(start.get(), s.stream.get()));
  launch();
  ENCORE_CUDA_CHECK(name, cudaEventRecord(stop.get(), s.stream.get()));
  ENCORE_CUDA_CHECK(name, cudaEventSynchronize(stop.get()));
  float ms = 0.0f;
  ENCORE_CUDA_CHECK(name, cudaEventElapsedTime(&ms, start.get(), stop.get()));
  const auto ns = static_cast<int64_t>(static_cast<double>(ms) * 1e6);
  Ledger& ledger = Ledger::global();
  ledger.add(Counter::KernelNs, ns);
  // The GPU interval ended at most a synchronization ago: place the event just before now.
  if (ledger.profiling()) ledger.record({name, "kernel", now_ns() - ns, ns});
}

}  // namespace encore::cuda
