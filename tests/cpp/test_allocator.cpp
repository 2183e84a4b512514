// The CPU allocator hands freed blocks out again for the same size (counted in the ledger).
#include <cstdint>

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
