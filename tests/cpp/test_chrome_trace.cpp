// The Chrome trace (core/ledger.h) as Perfetto reads it: one track per thread that ran kernels,
// named by metadata events, and kernel events that carry their op, shapes, bytes and
// implementation; phases nest around the kernels they ran.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "encore.h"

using namespace encore;
using nlohmann::json;

namespace {

struct Recorded {
  json events;           // the "X" events
  json metadata;         // the "M" events
  int64_t a = 0, b = 0;  // the worker threads' system ids
};

// Profiles eager calls on the main thread and two worker threads (one named by the program),
// and a traced function's replays on the main thread.
Recorded record_three_threads() {
  Ledger& l = Ledger::global();
  l.reset();
  l.set_profiling(true);
  const Tensor x = ones({2, 16, 4}), w = ones({3, 4, 8});
  conv1d(x, w);
  auto f = trace([](const Tensor& t) { return relu(t) + 1.0; }, {.name = "step"});
  for (int i = 0; i < 3; ++i) f(ones({5}));
  Recorded r;
  std::thread a([&] {
    pthread_setname_np(pthread_self(), "worker-a");
    r.a = syscall(SYS_gettid);
    relu(ones({3}));
  });
  a.join();
  std::thread b([&] {
    r.b = syscall(SYS_gettid);
    exp(ones({4, 2}));
  });
  b.join();
  l.set_profiling(false);
  const json trace = json::parse(l.chrome_trace_json());
  r.events = json::array();
  r.metadata = json::array();
  for (const json& e : trace.at("traceEvents"))
    (e.at("ph") == "M" ? r.metadata : r.events).push_back(e);
  return r;
}

const json* find_event(const json& events, std::string_view cat, std::string_view name) {
  for (const json& e : events)
    if (e.at("cat") == cat && e.at("name") == name) return &e;
  return nullptr;
}

}  // namespace

TEST(ChromeTrace, EveryThreadHasANamedTrackInTheProcess) {
  const Recorded r = record_three_threads();
  const int64_t pid = getpid();
  std::map<int64_t, std::string> names;
  bool process_named = false;
  for (const json& m : r.metadata) {
    EXPECT_EQ(m.at("pid"), pid);
    if (m.at("name") == "process_name") {
      process_named = true;
      EXPECT_NE(m.at("args").at("name").get<std::string>().find("encore"), std::string::npos);
    }
    if (m.at("name") == "thread_name")
      names[m.at("tid").get<int64_t>()] = m.at("args").at("name").get<std::string>();
  }
  EXPECT_TRUE(process_named);
  std::set<int64_t> tids;
  for (const json& e : r.events) {
    EXPECT_EQ(e.at("pid"), pid);
    EXPECT_GE(e.at("ts").get<double>(), 0.0);
    tids.insert(e.at("tid").get<int64_t>());
  }
  EXPECT_EQ(tids, (std::set<int64_t>{pid, r.a, r.b}));
  EXPECT_EQ(names.size(), 3u);
  EXPECT_EQ(names[pid], "main");
  EXPECT_EQ(names[r.a], "worker-a " + std::to_string(r.a));
  EXPECT_EQ(names[r.b], "thread " + std::to_string(r.b));
  const json* relu = find_event(r.events, "kernel", "relu");
  ASSERT_TRUE(relu);
  // The first relu ran eagerly on the main thread (the traced function's first call); the
  // worker's is on its own track.
  std::set<int64_t> relu_tids;
  for (const json& e : r.events)
    if (e.at("name") == "relu") relu_tids.insert(e.at("tid").get<int64_t>());
  EXPECT_TRUE(relu_tids.count(r.a));
  const json* ex = find_event(r.events, "kernel", "exp");
  ASSERT_TRUE(ex);
  EXPECT_EQ(ex->at("tid"), r.b);
}

TEST(ChromeTrace, KernelEventsCarryOpShapesBytesAndImplementation) {
  const Recorded r = record_three_threads();
  const json* conv = find_event(r.events, "kernel", "conv1d");
  ASSERT_TRUE(conv);
  const json& args = conv->at("args");
  EXPECT_EQ(args.at("op"), "conv1d");
  EXPECT_EQ(args.at("device"), "cpu");
  EXPECT_EQ(args.at("inputs"), json({"(2, 16, 4) float32", "(3, 4, 8) float32"}));
  EXPECT_EQ(args.at("outputs"), json({"(2, 14, 8) float32"}));
  EXPECT_EQ(args.at("bytes"), (2 * 16 * 4 + 3 * 4 * 8 + 2 * 14 * 8) * 4);
  // oneDNN's implementation, as the graph dump names it.
  EXPECT_FALSE(args.at("implementation").get<std::string>().empty());
  const json* ex = find_event(r.events, "kernel", "exp");
  ASSERT_TRUE(ex);
  EXPECT_EQ(ex->at("args").at("inputs"), json({"(4, 2) float32"}));
  EXPECT_EQ(ex->at("args").at("bytes"), 2 * 8 * 4);
  for (const json& e : r.events) {
    if (e.at("cat") == "kernel") {
      EXPECT_TRUE(e.contains("args")) << e.dump();
    }
  }
}

TEST(ChromeTrace, ReplayedKernelsNestInTheirReplayOnTheSameTrack) {
  const Recorded r = record_three_threads();
  int replays = 0;
  for (const json& rep : r.events) {
    if (rep.at("cat") != "replay") continue;
    ++replays;
    EXPECT_EQ(rep.at("name"), "step");
    const double begin = rep.at("ts").get<double>(), end = begin + rep.at("dur").get<double>();
    int inside = 0;
    for (const json& k : r.events)
      if (k.at("cat") == "kernel" && k.at("tid") == rep.at("tid") &&
          k.at("ts").get<double>() >= begin &&
          k.at("ts").get<double>() + k.at("dur").get<double>() <= end + 1e-3)
        ++inside;
    EXPECT_GE(inside, 1) << rep.dump();  // relu and the add, unless a pass fused them
  }
  EXPECT_EQ(replays, 2);  // the first call ran eagerly
  ASSERT_TRUE(find_event(r.events, "trace", "step"));
}
