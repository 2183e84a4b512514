#include "core/threads.h"

#include <cblas.h>
#include <omp.h>

#include <atomic>
#include <cstdlib>
#include <string>

#include "core/error.h"

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
  const unsigned g = g_generation.load(std::memory_order_acquire);
  if (seen == g) return;
  const int n = num_threads();
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
  seen = g;
}

}  // namespace encore
