// A forked child (a multiprocessing worker) can use encore: it never waits forever for OpenMP
// workers or for a lock another thread of its parent held at the fork.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <string>
#include <thread>

#include "core/cpu_allocator.h"
#include "core/ledger.h"
#include "core/parallel.h"
#include "core/threads.h"
#include "helpers.h"
#include "ops/build_info.h"

namespace encore {
namespace {

// Runs `body` in a forked child; the child's exit status is body's result (0 = passed; 98: it
// threw), -1 when it did not end within the time limit (it is killed: it hung), -2 when fork
// failed, -3 when the child was killed by a signal.
int in_child(const std::function<int()>& body,
             std::chrono::seconds limit = std::chrono::seconds(60)) {
  const pid_t pid = ::fork();
  if (pid < 0) return -2;
  if (pid == 0) {
    int code = 98;
    try {
      code = body();
    } catch (...) {
    }
    ::_exit(code);
  }
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -3;
}

// Work that runs on the pool: a GEMM (OpenBLAS), a convolution (oneDNN), encore's own
// parallel_for.
double pool_work() {
  const Tensor a = test::rand32({256, 512}), b = test::rand32({512, 256});
  const Tensor x = test::rand32({8, 200, 16}), w = test::rand32({5, 16, 32});
  std::atomic<int64_t> covered{0};
  parallel_for(1000, 1, [&](int64_t begin, int64_t end) noexcept { covered += end - begin; });
  return sum(matmul(a, b)).item() + sum(conv1d(x, w)).item() + static_cast<double>(covered.load());
}

// GNU OpenMP keeps the parent's worker pool in the child without its threads: before, the
// child's first parallel GEMM waited for them forever. Now the child runs on one thread, the
// same results (up to summation order), and refuses more threads by name.
TEST(Fork, ChildOfAThreadWithWorkersRunsOnOneThread) {
  const int before = num_threads();
  set_num_threads(2);
  const double expected = pool_work();  // starts this thread's workers
  const int code = in_child([&] {
    if (num_threads() != 1 || !threads_pinned_by_fork()) return 1;
    if (std::abs(pool_work() - expected) > 1e-4 * std::abs(expected)) return 2;
    try {
      set_num_threads(2);
      return 3;
    } catch (const UnsupportedError& e) {
      if (std::string(e.what()).find("forked") == std::string::npos) return 4;
    }
    set_num_threads(1);  // allowed: it is what the child runs on
    return show_config().find("(pinned: forked") == std::string::npos ? 5 : 0;
  });
  EXPECT_EQ(code, 0) << "-1: the child hung";
  EXPECT_EQ(num_threads(), 2);
  EXPECT_FALSE(threads_pinned_by_fork());
  set_num_threads(before);
}

// The child's first op prepares a oneDNN primitive (a shape new to it, tensors made before the
// fork): the primitive takes the thread's OpenMP count when it is made, and before, that was
// still the parent's 2 in a child whose first op had nothing to sync it. It hung.
TEST(Fork, ChildsFirstOpPreparesForOneThread) {
  const int before = num_threads();
  set_num_threads(2);
  pool_work();
  const Tensor x = test::rand32({4, 300, 16}), w = test::rand32({7, 16, 48});
  const int code = in_child([&] {
    const Tensor y = conv1d(x, w);
    return y.shape() == Shape{4, 294, 48} && std::isfinite(sum(y).item()) ? 0 : 1;
  });
  EXPECT_EQ(code, 0) << "-1: the child hung";
  set_num_threads(before);
}

// Only the forking thread's pool matters: a thread that never started workers forks a child
// that keeps the configured count and starts workers of its own.
TEST(Fork, ChildOfAThreadWithoutWorkersKeepsItsThreads) {
  const int before = num_threads();
  set_num_threads(2);
  pool_work();  // the main thread's workers: not the forking thread's
  int code = -4;
  std::thread([&] {
    code = in_child([] {
      if (num_threads() != 2 || threads_pinned_by_fork()) return 1;
      pool_work();
      return 0;
    });
  }).join();
  EXPECT_EQ(code, 0) << "-1: the child hung";
  set_num_threads(before);
}

// Forks `forks` children while `busy` runs in a loop on another thread; each child uses the
// allocator and the ledger from a new thread. Returns the exit codes other than 0 (passed), with
// the time each child took.
std::string failed_children(const std::function<void()>& busy, int forks) {
  std::atomic<bool> stop{false};
  std::atomic<int64_t> laps{0};
  std::thread worker([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      busy();
      laps.fetch_add(1, std::memory_order_relaxed);
    }
  });
  // The worker's first laps allocate (its thread, its ledger block): under a sanitizer, whose
  // allocator does not survive fork() as glibc's does, a fork then could hang the child in
  // malloc. The loop itself allocates nothing.
  while (laps.load(std::memory_order_relaxed) < 1000) std::this_thread::yield();
  std::string failed;
  for (int i = 0; i < forks; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const int code = in_child(
        [] {
          double total = 0;
          std::thread([&] {
            total = sum(full({32, 32}, 1.0) + 1.0).item();
          }).join();  // a new ledger block
          Ledger::global().record({"child", "op", 0, 0});
          return total == 2048.0 ? 0 : 1;
        },
        std::chrono::seconds(20));
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - start);
    if (code != 0) failed += detail::cat("child ", i, ": ", code, " after ", ms.count(), " ms; ");
  }
  stop = true;
  worker.join();
  return failed;
}

// Before, a child forked while another thread held the allocator's or the ledger blocks' mutex
// waited for it forever: without the fork handlers, 56 of 100 and 19 of 50 children hung in
// these tests. Each loop holds its mutex for much of its time. (The events' mutex has the same
// handler; no loop held it often enough at the fork to test it: 1 child in 50 hung.)
TEST(Fork, ChildForkedWhileAnotherThreadAllocates) {
  CpuAllocator& host = cpu_allocator();
  EXPECT_EQ(
      failed_children(
          [&] { host.deallocate(host.allocate(256, Device::cpu()), 256, Device::cpu()); }, 50),
      "");
}

TEST(Fork, ChildForkedWhileAnotherThreadReadsTheLedger) {
  EXPECT_EQ(failed_children([] { (void)Ledger::global().get(Counter::OpsDispatched); }, 50), "");
}

}  // namespace
}  // namespace encore
