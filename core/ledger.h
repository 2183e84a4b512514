// The cost ledger: where the time goes. Global counters (ops dispatched, dispatch and kernel
// time, traces, planning, capture, autotuning, replays, allocations), a table view, and —
// while profiling is on — timed events exportable as Chrome trace JSON (opens in Perfetto).
#pragma once

#include "core/cxx20.h"

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace encore {

enum class Counter : int {
  OpsDispatched,  // eager op calls
  DispatchNs,     // wall time inside eager op calls, kernels included (CPU kernels are synchronous)
  KernelNs,       // time inside kernels (measured only while profiling is on)
  KernelsTimed,   // kernel calls that KernelNs covers
  OpsTraced,      // op calls recorded into a graph instead of running
  Traces,         // traced-function cache misses that built a new Plan
  TraceNs,        // running the user function symbolically
  OptimizeNs,     // graph passes
  PlanNs,         // memory plan + Plan build (kernel resolution, primitive creation)
  CaptureNs,      // CUDA stream capture of a Plan
  InstantiateNs,  // cudaGraphInstantiate
  Autotunes,  // per-shape algorithm searches / primitive creations (cache misses that made a state)
  AutotuneNs,
  AutotuneHits,       // per-shape cache hits on a state (and searches answered by a loaded choice)
  PreparedEvictions,  // per-shape states dropped from the dispatcher's bounded cache
  Replays,
  ReplayNs,
  GraphLaunches,  // cudaGraphLaunch calls: one per replay of a captured Plan
  Allocations,
  BytesAllocated,
  CopyInNs,           // replays: padding (bucketing) and copying arguments in (measured only while
                      // profiling)
  AllocationsReused,  // host blocks handed out again from the CPU allocator's cache
  LayoutReorders,     // to_blocked / from_blocked nodes run (conv1d 'blocked' layout)
  LayoutReorderNs,
  Collectives,      // collectives run (core/dist.h), a group of one's identities included
  CollectiveBytes,  // bytes they sent from this rank (their inputs)
  CommNs,           // time the engine spent running them (its own thread on the CPU)
  CommWaitNs,       // time callers waited for them: the part of CommNs compute did not hide
  Count
};

std::string_view counter_name(Counter c);

/// Levels rather than counts: what a cache holds now (reset() leaves them).
enum class Gauge : int {
  PreparedBytes,    // bytes the per-shape kernel states hold (ops/prepared.h)
  PreparedEntries,  // states held
  Count
};

std::string_view gauge_name(Gauge g);

/// Monotonic clock in nanoseconds.
inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct TraceEvent {
  std::string name;
  const char* category;  // "op", "kernel", "trace", "plan", "capture", "replay", "autotune"
  int64_t start_ns;
  int64_t duration_ns;
  /// The members of a JSON object, e.g. `"op":"relu","bytes":32` (a kernel's op, shapes, bytes
  /// and implementation), shown by Perfetto when the event is selected; empty: none.
  std::string args = {};
  /// The recording thread's system id (gettid); record() fills it in.
  int64_t tid = 0;
};

class Ledger {
 public:
  static Ledger& global();

  /// Adds to this thread's own copy of the counter: a plain load and store, no locked
  /// instruction (the dispatcher adds to several counters per op). get() sums the threads'.
  void add(Counter c, int64_t v);
  int64_t get(Counter c) const;
  void reset();
  void set(Gauge g, int64_t v) { gauges_[static_cast<int>(g)].store(v, std::memory_order_relaxed); }
  int64_t get(Gauge g) const {
    return gauges_[static_cast<int>(g)].load(std::memory_order_relaxed);
  }

  /// Bytes of device and host memory encore holds now, and the most it held at once since
  /// the last reset_peak(): an eager step's peak, against a traced step's arena.
  void on_allocate(size_t nbytes);
  void on_free(size_t nbytes) {
    live_.fetch_sub(static_cast<int64_t>(nbytes), std::memory_order_relaxed);
  }
  int64_t live_bytes() const { return live_.load(std::memory_order_relaxed); }
  int64_t peak_live_bytes() const { return peak_.load(std::memory_order_relaxed); }
  void reset_peak() { peak_.store(live_bytes(), std::memory_order_relaxed); }

  /// Profiling times every kernel (CUDA: with events) and records events for Chrome trace.
  bool profiling() const { return profiling_.load(std::memory_order_relaxed); }
  void set_profiling(bool on) { profiling_.store(on, std::memory_order_relaxed); }
  /// Keeps `e` as an event of the calling thread (its track in the Chrome trace).
  void record(TraceEvent e);
  std::vector<TraceEvent> events() const;

  /// A plain-text table of every non-zero counter (times in ms).
  std::string table() const;
  /// Chrome trace JSON of everything recorded so far: a complete event ("ph":"X") per event on
  /// its thread's track (pid, tid), with its args, and metadata events naming the process and
  /// each thread. Phases (trace, plan, replay, ...) and the kernels they run share the track, so
  /// a replay's kernels nest under it.
  std::string chrome_trace_json() const;
  /// Writes it to `path`, atomically (core/file.h; FileError when it cannot be written).
  void write_chrome_trace(const std::string& path) const;

 private:
  std::atomic<bool> profiling_{false};
  std::atomic<int64_t> live_{0}, peak_{0};
  std::array<std::atomic<int64_t>, static_cast<size_t>(Gauge::Count)> gauges_{};
  mutable std::mutex events_mutex_;
  std::vector<TraceEvent> events_;
  std::vector<std::pair<int64_t, std::string>> thread_names_;  // tid, name; kept across reset()
};

/// Adds the elapsed time of a scope to a counter, and records an event while profiling.
class ScopedTimer {
 public:
  ScopedTimer(Counter c, const char* category, std::string name = {})
      : counter_(c), category_(category), name_(std::move(name)), start_(now_ns()) {}
  ~ScopedTimer() { stop(); }
  /// Stops early; returns the elapsed nanoseconds.
  int64_t stop();

 private:
  Counter counter_;
  const char* category_;
  std::string name_;
  int64_t start_;
  int64_t elapsed_ = -1;
};

std::string json_escape(std::string_view s);

}  // namespace encore
