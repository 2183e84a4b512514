// The CPU allocator hands freed blocks out again for the same size (counted in the ledger).
#include <cstdint>
#include <deque>
#include <thread>
#include <vector>

#include "core/ledger.h"
#include "helpers.h"

namespace encore {
namespace {

TEST(Allocator, ReusesFreedLargeHostBlocks) {
  Ledger& l = Ledger::global();
  const Shape large{3, 1 << 19};  // 6 MiB of float32
  const void* first = nullptr;
  {
    Tensor t = full(large, 1.0);
    first = t.data_ptr();
  }
  const int64_t reused = l.get(Counter::AllocationsReused);
  Tensor again = zeros(large);
  EXPECT_EQ(l.get(Counter::AllocationsReused), reused + 1);
  EXPECT_EQ(again.data_ptr(), first);
  test::expect_values(again.slice(1, 0, 2).slice(0, 0, 1), {0, 0});  // a reused block is rewritten
}

TEST(Allocator, ReusesFreedSmallHostBlocksOfTheSameSize) {
  Ledger& l = Ledger::global();
  const void* first = nullptr;
  {
    Tensor t = full({3, 333}, 2.0);  // an odd size no other live tensor here has
    first = t.data_ptr();
  }
  const int64_t reused = l.get(Counter::AllocationsReused);
  Tensor again = full({3, 333}, 3.0);
  EXPECT_EQ(l.get(Counter::AllocationsReused), reused + 1);
  EXPECT_EQ(again.data_ptr(), first);
  test::expect_values(again.slice(1, 0, 2).slice(0, 0, 1), {3, 3});
  Tensor other = zeros({3, 400});  // another size gets another block
  EXPECT_NE(other.data_ptr(), first);
}

// Threads allocate and free blocks of the same few sizes, small and large, at once: a block
// handed out twice would show another thread's values.
TEST(Allocator, ConcurrentAllocationsNeverShareABlock) {
  constexpr int kThreads = 4, kIterations = 1500;
  const int64_t sizes[] = {16, 1000, 3000, 300000};  // 300000 float32: a large block
  std::vector<int> failures(kThreads, 0);
  std::vector<std::thread> threads;
  for (int k = 0; k < kThreads; ++k) {
    threads.emplace_back([&, k] {
      std::deque<std::pair<Tensor, float>> alive;  // two of each size live at once, freed in turn
      for (int i = 0; i < kIterations; ++i) {
        const float value = static_cast<float>(k * 10000 + i);
        alive.emplace_back(full({sizes[(i + k) % 4]}, value), value);
        if (alive.size() > 8) alive.pop_front();
        for (const auto& [t, v] : alive) {
          const float* p = t.data<float>();
          failures[k] += p[0] != v || p[t.numel() - 1] != v;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int k = 0; k < kThreads; ++k) EXPECT_EQ(failures[k], 0) << "thread " << k;
}

#if defined(__SANITIZE_ADDRESS__)
// A cached block is poisoned: reading freed storage still fails under the sanitizer.
TEST(AllocatorDeathTest, ReadingACachedBlockIsReportedUnderAsan) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const float* stale = nullptr;
  {
    Tensor t = zeros({3, 341});
    stale = t.data<float>();
  }
  EXPECT_DEATH(
      {
        volatile float v = stale[0];
        (void)v;
      },
      "use-after-poison");
}
#endif

}  // namespace
}  // namespace encore
