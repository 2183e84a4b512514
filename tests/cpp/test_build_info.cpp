// encore::version() and encore::show_config(): what a bug report needs to say.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "core/device.h"
#include "core/ledger.h"
#include "core/modes.h"
#include "core/parallel.h"
#include "core/threads.h"
#include "helpers.h"
#include "ops/build_info.h"

namespace encore {
namespace {

TEST(BuildInfo, VersionIsTheCMakeProjectVersion) {
  EXPECT_STREQ(version(), ENCORE_PROJECT_VERSION);
}

TEST(BuildInfo, ShowConfigNamesVersionsThreadsAndBackends) {
  const std::string config = show_config();
  EXPECT_EQ(config.rfind(std::string("encore ") + version() + " (", 0), 0u) << config;
  for (const char* expected :
       {"\n  oneDNN ", "\n  BLAS: OpenBLAS ", "\n  zlib ", "\n  OpenMP max threads: ",
        "\n  OpenBLAS threads: ", "\n  oneDNN threads: ", "\nbackends:\n  cpu: yes\n"}) {
    EXPECT_NE(config.find(expected), std::string::npos) << expected << " in\n" << config;
  }
  if (cuda_built()) {
    for (const char* expected :
         {"\n  CUDA runtime ", ", cuDNN ", "\n  cuda: built for CUDA architectures "})
      EXPECT_NE(config.find(expected), std::string::npos) << expected << " in\n" << config;
  } else {
    // Why not, in the words of cuda::unavailable_reason() (tests/cpp/test_backend.cpp).
    EXPECT_NE(config.find("\n  cuda: not available (" + cuda::unavailable_reason() + ")\n"),
              std::string::npos)
        << config;
  }
}

}  // namespace
}  // namespace encore

namespace encore {
namespace {

// oneDNN and OpenBLAS share one OpenMP pool whose size is encore's setting: a count set on one
// thread reaches a kernel run on another, and the configuration and ledger report it.
TEST(Threads, OnePoolOfTheConfiguredSize) {
  const int before = num_threads();
  set_num_threads(1);
  EXPECT_EQ(num_threads(), 1);
  EXPECT_NE(show_config().find("\n  OpenMP max threads: 1\n"), std::string::npos) << show_config();
  EXPECT_NE(show_config().find("\n  OpenBLAS threads: 1\n"), std::string::npos) << show_config();
  EXPECT_NE(show_config().find(", OpenMP)\n"), std::string::npos)
      << "OpenBLAS's OpenMP build: " << show_config();
  const std::string table = Ledger::global().table();
  const size_t at = table.find("cpu_threads");
  ASSERT_NE(at, std::string::npos) << table;
  EXPECT_EQ(std::stoi(table.substr(at + 11, table.find('\n', at) - at - 11)), 1) << table;
  set_num_threads(2);
  std::thread([] {
    EXPECT_NE(show_config().find("\n  OpenMP max threads: 2\n"), std::string::npos);
  }).join();
  // The same product on 1 and 2 threads: the pool size changes the work split, not the math.
  const Tensor a = test::rand32({64, 96}), b = test::rand32({96, 80});
  set_num_threads(1);
  const Tensor one = matmul(a, b);
  set_num_threads(2);
  test::expect_close(one, matmul(a, b), 1e-5, "matmul on 1 vs 2 threads");
  set_num_threads(before);
  EXPECT_THROW(set_num_threads(0), ValueError);
}

// The floating-point mode is per thread: the pool's workers flush subnormals exactly when the
// caller does. Each product here is 1e-40 (subnormal): flushed, the GEMM gives zeros; kept,
// 1024 of them sum to a normal 1.0e-37. A worker left in the other mode computes its share of
// the rows the other way (and, keeping subnormals, ~100x slower: the BiLSTM's backward pass).
TEST(Threads, WorkersFlushDenormalsAsTheCallerDoes) {
  const int threads = num_threads();
  const bool flush = flush_denormal();
  set_num_threads(2);
  const Tensor a = ones({1024, 1024}) * 1e-20;
  for (bool on : {false, true, false}) {
    set_flush_denormal(on);
    const Tensor y = matmul(a, a);
    const double largest = max(y).item(), smallest = -max(y * -1.0).item();
    if (on)
      EXPECT_EQ(largest, 0.0);
    else
      EXPECT_GT(smallest, 1e-38);
  }
  set_flush_denormal(flush);
  set_num_threads(threads);
}

// parallel_for hands out [0, n) once, in disjoint contiguous chunks: one per pool thread when
// there is enough work, one on the caller otherwise (also for n = 0 and a 1-thread pool).
TEST(Threads, ParallelForCoversEveryIndexOnce) {
  const int threads = num_threads();
  for (int pool : {1, 2, 3}) {
    set_num_threads(pool);
    for (int64_t n : {0, 1, 2, 7, 1000}) {
      for (int64_t min_parallel : {int64_t{1}, int64_t{1} << 40}) {
        std::vector<int> hits(n, 0);
        std::atomic<int> chunks{0};
        parallel_for(n, min_parallel, [&](int64_t b, int64_t e) noexcept {
          ++chunks;
          for (int64_t i = b; i < e; ++i) ++hits[i];
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i], 1) << "index " << i << " of " << n;
        const int expected = n == 0             ? 0
                             : n < min_parallel ? 1
                                                : static_cast<int>(std::min<int64_t>(pool, n));
        EXPECT_EQ(chunks.load(), expected)
            << "n=" << n << " pool=" << pool << " min_parallel=" << min_parallel;
      }
    }
  }
  set_num_threads(threads);
}

// The chunks run on the pool's workers with the caller's floating-point mode, like the BLAS
// and oneDNN kernels (the recurrent cells run there, between their GEMMs).
TEST(Threads, ParallelForWorkersFlushDenormalsAsTheCallerDoes) {
  const int threads = num_threads();
  const bool flush = flush_denormal();
  set_num_threads(2);
  for (bool on : {true, false}) {
    set_flush_denormal(on);
    sync_threads();  // what the dispatcher and a replay do before every kernel
    const DenormalScope scope;
    std::atomic<int> flushed{0}, chunks{0};
    parallel_for(2, 1, [&](int64_t, int64_t) noexcept {
      volatile float tiny = 1e-20f;
      const float product = tiny * tiny;  // 1e-40: subnormal, or 0 when flushed
      ++chunks;
      if (product == 0.0f) ++flushed;
    });
    EXPECT_EQ(chunks.load(), 2);
    EXPECT_EQ(flushed.load(), on ? 2 : 0) << "flush " << on;
  }
  set_flush_denormal(flush);
  set_num_threads(threads);
}

}  // namespace
}  // namespace encore
