#include "core/ledger.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/allocator.h"
#include "core/error.h"
#include "core/threads.h"

namespace encore {

namespace {
constexpr std::string_view kNames[] = {
    "ops_dispatched", "dispatch_ns", "kernel_ns",     "kernels_timed", "ops_traced",
    "traces",         "trace_ns",    "optimize_ns",   "plan_ns",       "capture_ns",
    "instantiate_ns", "autotunes",   "autotune_ns",   "autotune_hits", "prepared_evictions", "replays",
    "replay_ns",      "allocations", "bytes_allocated", "copy_in_ns", "allocations_reused",
    "layout_reorders", "layout_reorder_ns"};
static_assert(std::size(kNames) == static_cast<size_t>(Counter::Count));
}  // namespace

std::string_view counter_name(Counter c) { return kNames[static_cast<int>(c)]; }

Ledger& Ledger::global() {
  // Never destroyed: storages freed during static destruction still count themselves out.
  static Ledger* ledger = new Ledger;
  return *ledger;
}

void Ledger::reset() {
  for (auto& c : counters_) c.store(0, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(events_mutex_);
  events_.clear();
}

void Ledger::on_allocate(size_t nbytes) {
  add(Counter::Allocations, 1);
  add(Counter::BytesAllocated, static_cast<int64_t>(nbytes));
  const int64_t live = live_.fetch_add(static_cast<int64_t>(nbytes), std::memory_order_relaxed) + static_cast<int64_t>(nbytes);
  int64_t peak = peak_.load(std::memory_order_relaxed);
  while (live > peak && !peak_.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
  }
}

void Ledger::record(TraceEvent e) {
  std::lock_guard<std::mutex> lock(events_mutex_);
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
  s << line;
  if (const size_t cached = cpu_cached_bytes()) {
    std::snprintf(line, sizeof line, "%-18s %16zu\n", "host_cached_bytes", cached);
    s << line;
  }
  for (int i = 0; i < static_cast<int>(Counter::Count); ++i) {
    const int64_t v = counters_[i].load(std::memory_order_relaxed);
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
  const auto evs = events();
  const int64_t t0 = evs.empty() ? 0 : evs.front().start_ns;
  std::ostringstream s;
  s << "{\"traceEvents\":[";
  for (size_t i = 0; i < evs.size(); ++i) {
    const auto& e = evs[i];
    char buf[96];
    std::snprintf(buf, sizeof buf, ",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":1,\"tid\":1}",
                  (e.start_ns - t0) / 1e3, e.duration_ns / 1e3);
    s << (i ? "," : "") << "{\"name\":\"" << json_escape(e.name) << "\",\"cat\":\"" << e.category
      << "\"" << buf;
  }
  s << "],\"displayTimeUnit\":\"ms\"}";
  return s.str();
}

void Ledger::write_chrome_trace(const std::string& path) const {
  std::ofstream f(path);
  ENCORE_CHECK(f, ValueError, "[ledger] cannot open ", path, " for writing");
  f << chrome_trace_json();
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
