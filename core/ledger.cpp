#include "core/ledger.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <sstream>

#include "core/allocator.h"
#include "core/cpu_info.h"
#include "core/error.h"
#include "core/file.h"
#include "core/threads.h"

namespace encore {

namespace {
constexpr std::string_view kNames[] = {"ops_dispatched",
                                       "dispatch_ns",
                                       "kernel_ns",
                                       "kernels_timed",
                                       "ops_traced",
                                       "traces",
                                       "trace_ns",
                                       "optimize_ns",
                                       "plan_ns",
                                       "capture_ns",
                                       "instantiate_ns",
                                       "autotunes",
                                       "autotune_ns",
                                       "autotune_hits",
                                       "prepared_evictions",
                                       "replays",
                                       "replay_ns",
                                       "graph_launches",
                                       "allocations",
                                       "bytes_allocated",
                                       "copy_in_ns",
                                       "allocations_reused",
                                       "layout_reorders",
                                       "layout_reorder_ns",
                                       "collectives",
                                       "collective_bytes",
                                       "comm_ns",
                                       "comm_wait_ns"};
static_assert(std::size(kNames) == static_cast<size_t>(Counter::Count));
constexpr std::string_view kGaugeNames[] = {"prepared_bytes", "prepared_entries"};
static_assert(std::size(kGaugeNames) == static_cast<size_t>(Gauge::Count));
}  // namespace

std::string_view counter_name(Counter c) { return kNames[static_cast<int>(c)]; }
std::string_view gauge_name(Gauge g) { return kGaugeNames[static_cast<int>(g)]; }

namespace {

constexpr int kCounters = static_cast<int>(Counter::Count);
// Only the owning thread writes a block; readers load its values concurrently.
using Block = std::array<std::atomic<int64_t>, kCounters>;

// Every thread that adds to the ledger gets a block of its own, and get() sums all blocks: a
// locked add on one shared cache line cost about a tenth of an eager op. A thread that exits
// hands its block, values and all, to the next thread that needs one, so blocks are never
// freed, a sum never loses what an exited thread counted, and there are at most as many
// blocks as threads ever counted at once.
class Blocks {
 public:
  static Blocks& get() {
    static Blocks* blocks = [] {  // never destroyed, like the ledger
      // The forking thread holds the mutex across fork(), so no child inherits it locked.
      pthread_atfork([] { get().mutex_.lock(); }, [] { get().mutex_.unlock(); },
                     [] { get().mutex_.unlock(); });
      return new Blocks;
    }();
    return *blocks;
  }
  Block* acquire() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!idle_.empty()) {
      Block* b = idle_.back();
      idle_.pop_back();
      return b;
    }
    all_.push_back(std::make_unique<Block>());
    return all_.back().get();
  }
  void release(Block* b) {
    std::lock_guard<std::mutex> lock(mutex_);
    idle_.push_back(b);
  }
  int64_t sum(int c) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return raw_sum(c) - baseline_[c];
  }
  /// reset() cannot zero blocks that other threads write, so it records what get() subtracts.
  void reset() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (int c = 0; c < kCounters; ++c) baseline_[c] = raw_sum(c);
  }

 private:
  int64_t raw_sum(int c) const {
    int64_t s = 0;
    for (const auto& b : all_) s += (*b)[c].load(std::memory_order_relaxed);
    return s;
  }
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Block>> all_;
  std::vector<Block*> idle_;
  std::array<int64_t, kCounters> baseline_{};
};

// Read on every add: a trivially initialized thread_local, so no TLS wrapper call.
thread_local Block* t_block = nullptr;
thread_local bool t_exited = false;

// Hands the thread's block back when the thread exits.
struct Lease {
  Block* block = nullptr;
  ~Lease() {
    if (block) Blocks::get().release(block);
    t_block = nullptr;
    t_exited = true;
  }
};
thread_local Lease t_lease;

// Out of line, so that the common path of add() stays a few instructions.
[[gnu::noinline]] Block& first_block() {
  t_block = Blocks::get().acquire();
  // Adds from later thread-exit destructors keep the block they take: it still counts.
  if (!t_exited) t_lease.block = t_block;
  return *t_block;
}

Block& this_thread_block() { return t_block ? *t_block : first_block(); }

}  // namespace

Ledger& Ledger::global() {
  // Never destroyed: storages freed during static destruction still count themselves out.
  static Ledger* ledger = [] {
    pthread_atfork([] { global().events_mutex_.lock(); }, [] { global().events_mutex_.unlock(); },
                   [] { global().events_mutex_.unlock(); });
    return new Ledger;
  }();
  return *ledger;
}

namespace {
// Made while the library loads: a fork() while another thread was inside a first use would
// leave the child waiting on a half-done initialization.
[[maybe_unused]] const bool g_made_at_load = (Blocks::get(), Ledger::global(), true);
}  // namespace

void Ledger::add(Counter c, int64_t v) {
  std::atomic<int64_t>& x = this_thread_block()[static_cast<int>(c)];
  x.store(x.load(std::memory_order_relaxed) + v, std::memory_order_relaxed);
}

int64_t Ledger::get(Counter c) const { return Blocks::get().sum(static_cast<int>(c)); }

void Ledger::reset() {
  Blocks::get().reset();
  std::lock_guard<std::mutex> lock(events_mutex_);
  events_.clear();
}

void Ledger::on_allocate(size_t nbytes) {
  add(Counter::Allocations, 1);
  add(Counter::BytesAllocated, static_cast<int64_t>(nbytes));
  const int64_t live = live_.fetch_add(static_cast<int64_t>(nbytes), std::memory_order_relaxed) +
                       static_cast<int64_t>(nbytes);
  int64_t peak = peak_.load(std::memory_order_relaxed);
  while (live > peak && !peak_.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
  }
}

namespace {

// The calling thread's system id, cached (gettid() itself needs glibc 2.30, the wheel 2.28); a
// forked child's thread asks again.
struct ThreadId {
  pid_t pid = 0;
  int64_t tid = 0;
};
thread_local ThreadId t_id;

std::string process_comm() {
  char name[64] = {};
  if (FILE* f = std::fopen("/proc/self/comm", "r")) {
    if (!std::fgets(name, sizeof name, f)) name[0] = 0;
    std::fclose(f);
  }
  std::string s(name);
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

// The track's name: "main" for the process's first thread; else the name the program gave the
// thread (pthread_setname_np), which starts as the process's own, and its id.
std::string thread_name(int64_t tid) {
  if (tid == getpid()) return "main";
  char name[32] = {};
  pthread_getname_np(pthread_self(), name, sizeof name);
  const std::string given(name);
  return (given.empty() || given == process_comm() ? "thread" : given) + " " + std::to_string(tid);
}

}  // namespace

void Ledger::record(TraceEvent e) {
  const pid_t pid = getpid();
  const bool first = t_id.pid != pid;
  if (first) t_id = {pid, static_cast<int64_t>(syscall(SYS_gettid))};
  e.tid = t_id.tid;
  std::string name = first ? thread_name(e.tid) : std::string();
  std::lock_guard<std::mutex> lock(events_mutex_);
  if (first) {
    // A thread id the system reused for a new thread: the new thread's name.
    std::erase_if(thread_names_, [&](const auto& t) { return t.first == e.tid; });
    thread_names_.emplace_back(e.tid, std::move(name));
  }
  events_.push_back(std::move(e));
}

std::vector<TraceEvent> Ledger::events() const {
  std::lock_guard<std::mutex> lock(events_mutex_);
  return events_;
}

std::string Ledger::table() const {
  std::ostringstream s;
  char line[128];
  std::snprintf(line, sizeof line, "%-18s %16s\n%-18s %16d\n", "counter", "value", "cpu_threads",
                num_threads());
  s << line << "gemm_kernels       " << cpu::kernels_summary() << "\n";
  if (const size_t cached = cpu_cached_bytes()) {
    std::snprintf(line, sizeof line, "%-18s %16zu\n", "host_cached_bytes", cached);
    s << line;
  }
  for (int i = 0; i < static_cast<int>(Gauge::Count); ++i) {
    if (const int64_t v = get(static_cast<Gauge>(i))) {
      std::snprintf(line, sizeof line, "%-18s %16lld\n", kGaugeNames[i].data(),
                    static_cast<long long>(v));
      s << line;
    }
  }
  for (int i = 0; i < static_cast<int>(Counter::Count); ++i) {
    const int64_t v = get(static_cast<Counter>(i));
    if (v == 0) continue;
    std::string_view n = kNames[i];
    if (n.ends_with("_ns")) {
      std::snprintf(line, sizeof line, "%-18s %13.3f ms\n",
                    (std::string(n.substr(0, n.size() - 3)) + "_time").c_str(), v / 1e6);
    } else {
      std::snprintf(line, sizeof line, "%-18s %16lld\n", std::string(n).c_str(),
                    static_cast<long long>(v));
    }
    s << line;
  }
  return s.str();
}

std::string json_escape(std::string_view in) {
  std::string out;
  for (char c : in) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

std::string Ledger::chrome_trace_json() const {
  std::vector<TraceEvent> evs;
  std::vector<std::pair<int64_t, std::string>> names;
  {
    std::lock_guard<std::mutex> lock(events_mutex_);
    evs = events_;
    names = thread_names_;
  }
  // An enclosing phase is recorded after the kernels it ran: the earliest start is time zero.
  int64_t t0 = evs.empty() ? 0 : evs.front().start_ns;
  for (const TraceEvent& e : evs) t0 = std::min(t0, e.start_ns);
  const long pid = getpid();
  std::ostringstream s;
  s << "{\"traceEvents\":[{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" << pid
    << ",\"tid\":0,\"args\":{\"name\":\"encore " << json_escape(process_comm()) << " (pid " << pid
    << ")\"}}";
  // Tracks of the threads that recorded events, main first, then in order of first event.
  int sort_index = 0;
  for (const auto& [tid, name] : names) {
    if (std::none_of(evs.begin(), evs.end(), [&](const TraceEvent& e) { return e.tid == tid; }))
      continue;
    s << ",{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" << pid << ",\"tid\":" << tid
      << ",\"args\":{\"name\":\"" << json_escape(name) << "\"}}"
      << ",{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":" << pid << ",\"tid\":" << tid
      << ",\"args\":{\"sort_index\":" << (tid == pid ? 0 : ++sort_index) << "}}";
  }
  for (const TraceEvent& e : evs) {
    char buf[128];
    std::snprintf(buf, sizeof buf,
                  ",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%ld,\"tid\":%lld",
                  (e.start_ns - t0) / 1e3, e.duration_ns / 1e3, pid, static_cast<long long>(e.tid));
    s << ",{\"name\":\"" << json_escape(e.name) << "\",\"cat\":\"" << e.category << "\"" << buf;
    if (!e.args.empty()) s << ",\"args\":{" << e.args << "}";
    s << "}";
  }
  s << "],\"displayTimeUnit\":\"ms\"}";
  return s.str();
}

void Ledger::write_chrome_trace(const std::string& path) const {
  write_file(path, chrome_trace_json(), "write_chrome_trace");
}

int64_t ScopedTimer::stop() {
  if (elapsed_ >= 0) return elapsed_;
  elapsed_ = now_ns() - start_;
  Ledger& l = Ledger::global();
  l.add(counter_, elapsed_);
  if (l.profiling()) l.record({name_.empty() ? category_ : name_, category_, start_, elapsed_});
  return elapsed_;
}

}  // namespace encore
