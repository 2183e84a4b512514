// The CPU allocator hands freed large blocks out again (counted in the ledger), never small ones.
#include "core/ledger.h"
#include "helpers.h"

namespace encore {
namespace {

TEST(Allocator, ReusesFreedLargeHostBlocks) {
  Ledger& l = Ledger::global();
  const Shape large{3, 1 << 19};  // 6 MiB of float32
  { Tensor t = full(large, 1.0); }
  const int64_t reused = l.get(Counter::AllocationsReused);
  Tensor again = zeros(large);
  EXPECT_EQ(l.get(Counter::AllocationsReused), reused + 1);
  test::expect_values(again.slice(1, 0, 2).slice(0, 0, 1), {0, 0});  // a reused block is rewritten
  { Tensor small = zeros({16}); }
  zeros({16});
  EXPECT_EQ(l.get(Counter::AllocationsReused), reused + 1);
}

}  // namespace
}  // namespace encore
