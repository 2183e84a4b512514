#include "core/threads.h"

#include <cblas.h>
#include <omp.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "core/modes.h"
#include "core/parallel.h"

namespace encore {

namespace {

int initial_threads() {
  const char* env = std::getenv("ENCORE_NUM_THREADS");
  if (!env || !*env) return omp_get_max_threads();
  char* end = nullptr;
  const long n = std::strtol(env, &end, 10);
  ENCORE_CHECK(*end == '\0' && n >= 1 && n <= 4096, ValueError,
               "[set_num_threads] ENCORE_NUM_THREADS='", env,
               "' is not a thread count (1 to 4096)");
  return static_cast<int>(n);
}

std::atomic<int>& threads() {
  static std::atomic<int> n{initial_threads()};
  return n;
}

// Bumped by every set_num_threads: a thread re-applies the count when it sees a new one.
std::atomic<unsigned> g_generation{1};

// GNU OpenMP keeps a thread's pool of workers across fork() without the workers: in the child,
// a parallel region of more than one thread waits for them forever (every BLAS and oneDNN call
// with a multiprocessing worker hung). A child forked by a thread that had started workers
// therefore runs its kernels on one thread, which needs no workers.
thread_local bool t_started_workers = false;
std::atomic<bool> g_pinned_by_fork{false};

// Called before a parallel region of more than one thread may start this thread's workers.
void note_workers() { t_started_workers = true; }

void on_fork_child() {
  if (!t_started_workers) return;
  g_pinned_by_fork.store(true, std::memory_order_relaxed);
  threads().store(1, std::memory_order_relaxed);
  g_generation.fetch_add(1, std::memory_order_release);
  omp_set_num_threads(1);  // for anything that reads the count before this thread's next sync
}

// Registered while the library loads, before any thread can be inside a first use.
const int g_fork_handler = pthread_atfork(nullptr, nullptr, on_fork_child);

}  // namespace

int num_threads() { return threads().load(std::memory_order_relaxed); }

bool threads_pinned_by_fork() { return g_pinned_by_fork.load(std::memory_order_relaxed); }

void set_num_threads(int n) {
  ENCORE_CHECK(n >= 1 && n <= 4096, ValueError,
               "[set_num_threads] thread count must be in 1 to 4096, got ", n);
  ENCORE_CHECK(n == 1 || !threads_pinned_by_fork(), UnsupportedError,
               "[set_num_threads] cannot use ", n,
               " threads in a process forked after its parent's OpenMP workers had started: GNU "
               "OpenMP cannot start workers again in the child (a parallel region would wait for "
               "the parent's forever), so this process runs its kernels on 1 thread; start it "
               "with multiprocessing's 'spawn' or 'forkserver' method to use more");
  threads().store(n, std::memory_order_relaxed);
  g_generation.fetch_add(1, std::memory_order_release);
  sync_threads();
}

void sync_threads() {
  thread_local unsigned seen = 0;
  thread_local int pool_flush = -1;  // the denormal mode this thread's pool was given
  const unsigned g = g_generation.load(std::memory_order_acquire);
  const int flush = flush_denormal();
  if (seen == g && pool_flush == flush) return;
  const int n = num_threads();
  if (n > 1) note_workers();
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
  // The floating-point mode is per thread: DenormalScope sets it on the calling thread only,
  // and the pool's workers (started by whichever call first needed them) run BLAS and oneDNN
  // kernels with their own. Without this, a worker computed with subnormals at ~100x the
  // cost while the caller flushed them: the BiLSTM's backward pass, whose gradients fade
  // over 400 steps, took 6x its forward time on 2 threads and 2x on 1.
#pragma omp parallel num_threads(n)
  if (omp_get_thread_num() != 0) set_thread_flush_denormal(flush != 0);  // the caller keeps its own
  seen = g;
  pool_flush = flush;
}

namespace detail {

void parallel_for(int64_t n, int64_t min_parallel, void (*body)(const void*, int64_t, int64_t),
                  const void* ctx) {
  if (n <= 0) return;
  const int threads = static_cast<int>(std::min<int64_t>(num_threads(), n));
  if (threads <= 1 || n < min_parallel) return body(ctx, 0, n);
  note_workers();
  // The workers already have the caller's floating-point mode (sync_threads ran before the
  // kernel that calls this).
#pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num(), k = omp_get_num_threads();
    body(ctx, n * t / k, n * (t + 1) / k);
  }
}

}  // namespace detail

}  // namespace encore
