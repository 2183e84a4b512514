#include "core/threads.h"

#include <cblas.h>
#include <omp.h>

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

}  // namespace

int num_threads() { return threads().load(std::memory_order_relaxed); }

void set_num_threads(int n) {
  ENCORE_CHECK(n >= 1 && n <= 4096, ValueError,
               "[set_num_threads] thread count must be in 1 to 4096, got ", n);
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
