// The CPU allocator hands freed blocks out again for the same size (counted in the ledger).
#include <algorithm>
#include <cstdint>
#include <deque>
#include <thread>
#include <vector>

#include "core/cpu_allocator.h"
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

// The block comes back, the identity does not: a storage's serial number is its own, shared by
// its views (what tests compare where an address would repeat).
TEST(Allocator, AReusedBlockIsAnotherStorage) {
  uint64_t serial = 0;
  const void* data = nullptr;
  {
    Tensor t = full({3, 335}, 2.0);
    serial = t.storage()->serial();
    data = t.data_ptr();
  }
  Tensor again = full({3, 335}, 3.0);
  ASSERT_EQ(again.data_ptr(), data);
  EXPECT_NE(again.storage()->serial(), serial);
  EXPECT_EQ(again.slice(1, 1, 3).storage()->serial(), again.storage()->serial());
  // Serials are unique across threads too.
  std::vector<uint64_t> serials(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&serials, i] { serials[i] = zeros({2}).storage()->serial(); });
  for (std::thread& t : threads) t.join();
  serials.push_back(again.storage()->serial());
  std::sort(serials.begin(), serials.end());
  EXPECT_EQ(std::adjacent_find(serials.begin(), serials.end()), serials.end());
}

// Sizes that keep changing (eager steps over varying lengths): the cache keeps the most
// recently freed blocks, up to the most the allocator had in use at once, not every size it
// ever freed.
TEST(Allocator, CacheKeepsTheRecentBlocksUpToThePeakInUse) {
  CpuAllocator a;
  const Device cpu = Device::cpu();
  const size_t mib = size_t{1} << 20;
  a.deallocate(a.allocate(8 * mib, cpu), 8 * mib, cpu);  // 8 MiB in use at most
  EXPECT_EQ(a.cached_bytes(), 8 * mib);
  auto size = [&](size_t k) { return 2 * mib + 4096 * k; };
  for (size_t k = 1; k <= 64; ++k) {  // a new size every time
    a.deallocate(a.allocate(size(k), cpu), size(k), cpu);
    EXPECT_LE(a.cached_bytes(), 8 * mib) << "after size " << k;
  }
  // Three of these fit in 8 MiB: the last three sizes are kept, older ones were freed.
  EXPECT_EQ(a.cached_bytes(), size(62) + size(63) + size(64));
  Ledger& l = Ledger::global();
  const int64_t reused = l.get(Counter::AllocationsReused);
  void* newest = a.allocate(size(64), cpu);
  EXPECT_EQ(l.get(Counter::AllocationsReused), reused + 1);
  void* evicted = a.allocate(size(61), cpu);
  EXPECT_EQ(l.get(Counter::AllocationsReused), reused + 1);
  a.deallocate(newest, size(64), cpu);
  a.deallocate(evicted, size(61), cpu);
  a.release_cached();
  EXPECT_EQ(a.cached_bytes(), 0u);
}

// Small blocks have their own cap (64 MiB), however much was once in use.
TEST(Allocator, SmallBlocksStayUnderTheirCap) {
  CpuAllocator a;
  const Device cpu = Device::cpu();
  const size_t n = 1000 * 1024;  // just under the large-block size
  std::vector<void*> blocks;
  for (int i = 0; i < 100; ++i) blocks.push_back(a.allocate(n, cpu));  // ~98 MiB in use
  for (void* p : blocks) a.deallocate(p, n, cpu);
  EXPECT_LE(a.cached_bytes(), CpuAllocator::kSmallCap);
  EXPECT_GT(a.cached_bytes(), CpuAllocator::kSmallCap - n);
}

// release_cached_memory frees every cached block; tensors keep theirs, and the next
// allocations are fresh ones.
TEST(Allocator, ReleaseCachedMemoryEmptiesTheHostCache) {
  Ledger& l = Ledger::global();
  const Tensor kept = full({1 << 18}, 1.0);
  { Tensor t = zeros({5, 331}); }
  { Tensor t = zeros({3, 1 << 19}); }
  EXPECT_GE(cpu_cached_bytes(), size_t{5 * 331 * 4} + (size_t{6} << 20));
  release_cached_memory();
  EXPECT_EQ(cpu_cached_bytes(), 0u);
  release_cached_memory();  // nothing left: a no-op
  const int64_t reused = l.get(Counter::AllocationsReused);
  EXPECT_EQ(sum(zeros({5, 331})).item(), 0.0);
  EXPECT_EQ(l.get(Counter::AllocationsReused), reused);
  EXPECT_EQ(sum(kept).item(), double(1 << 18));
}

// A failed allocation frees the cached blocks and tries once more; when that fails too, it is an
// OutOfMemoryError and the allocator stays usable.
TEST(Allocator, OutOfMemoryReleasesTheCacheAndStaysUsable) {
  CpuAllocator a;
  const Device cpu = Device::cpu();
  a.deallocate(a.allocate(4096, cpu), 4096, cpu);
  a.deallocate(a.allocate(size_t{2} << 20, cpu), size_t{2} << 20, cpu);
  ASSERT_EQ(a.cached_bytes(), 4096 + (size_t{2} << 20));
  EXPECT_THROW(a.allocate(size_t{1} << 50, cpu), OutOfMemoryError);  // 1 PiB
  EXPECT_EQ(a.cached_bytes(), 0u);
  void* p = a.allocate(4096, cpu);
  ASSERT_NE(p, nullptr);
  a.deallocate(p, 4096, cpu);
  EXPECT_EQ(a.cached_bytes(), 4096u);
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
