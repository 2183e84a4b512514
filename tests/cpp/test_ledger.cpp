// The ledger's counters: each thread adds into a block of its own, reads sum the blocks, and a
// block outlives its thread (core/ledger.cpp).
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "encore.h"

using namespace encore;

namespace {

// Runs `threads` threads at once, each adding 1 to `c` `adds` times, and joins them.
void add_from_threads(Counter c, int threads, int adds) {
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([=] {
      for (int i = 0; i < adds; ++i) Ledger::global().add(c, 1);
    });
  for (std::thread& t : pool) t.join();
}

}  // namespace

TEST(Ledger, CountsFromManyThreadsAreExact) {
  Ledger& l = Ledger::global();
  const int64_t before = l.get(Counter::CopyInNs);
  add_from_threads(Counter::CopyInNs, 8, 100000);
  EXPECT_EQ(l.get(Counter::CopyInNs), before + 800000);
}

TEST(Ledger, WhatExitedThreadsCountedStaysAndTheirBlocksAreReused) {
  Ledger& l = Ledger::global();
  const int64_t before = l.get(Counter::CopyInNs);
  // Sixty-four short-lived threads, four at a time: each later group takes the blocks the
  // earlier ones handed back, and adds on top of what those already hold.
  for (int round = 0; round < 16; ++round) add_from_threads(Counter::CopyInNs, 4, 1000);
  EXPECT_EQ(l.get(Counter::CopyInNs), before + 64000);
}

TEST(Ledger, ResetZeroesEveryThreadsCountsAndCountingGoesOn) {
  Ledger& l = Ledger::global();
  add_from_threads(Counter::CopyInNs, 3, 10);
  l.add(Counter::CopyInNs, 5);
  l.reset();
  for (int i = 0; i < static_cast<int>(Counter::Count); ++i)
    EXPECT_EQ(l.get(Counter(i)), 0) << counter_name(Counter(i));
  add_from_threads(Counter::CopyInNs, 3, 10);
  l.add(Counter::CopyInNs, 5);
  EXPECT_EQ(l.get(Counter::CopyInNs), 35);
}

TEST(Ledger, ReadsWhileOtherThreadsCountSeeOnlyGrowth) {
  Ledger& l = Ledger::global();
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (int i = 0; i < 200000; ++i) l.add(Counter::CopyInNs, 1);
    done = true;
  });
  int64_t last = l.get(Counter::CopyInNs);
  while (!done) {
    const int64_t now = l.get(Counter::CopyInNs);
    EXPECT_GE(now, last);
    last = now;
  }
  writer.join();
}
