// Failures of one rank as the others see them (tests/dist/run_mpi.py failures runs each on 2
// ranks with ENCORE_DIST_SCENARIO set; skipped otherwise): rank 1 skips a collective, aborts or
// exits, while rank 0 waits in an all-reduce. Rank 0 must fail with a clear error (or be ended
// by the launcher), never hang.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "core/dist.h"
#include "ops/collective.h"
#include "ops/ops.h"

namespace encore {
namespace {

bool scenario() { return std::getenv("ENCORE_DIST_SCENARIO") && dist::size() == 2; }

void rank0_waits() {
  try {
    dist::all_reduce(ones({4}));
    ADD_FAILURE() << "the all-reduce finished without its peer";
  } catch (const DistributedError& e) {
    std::printf("rank 0 failed as expected: %s\n", e.what());
    std::fflush(stdout);
    // A second collective is refused at once: the engine is broken.
    EXPECT_THROW(dist::all_reduce(ones({4})), DistributedError);
  }
}

TEST(Scenario, PeerSkipsACollective) {
  if (!scenario()) GTEST_SKIP() << "run by tests/dist/run_mpi.py failures";
  if (dist::rank() == 0) rank0_waits();
}

TEST(Scenario, PeerAborts) {
  if (!scenario()) GTEST_SKIP() << "run by tests/dist/run_mpi.py failures";
  if (dist::rank() == 1) std::abort();
  rank0_waits();
}

TEST(Scenario, PeerExits) {
  if (!scenario()) GTEST_SKIP() << "run by tests/dist/run_mpi.py failures";
  if (dist::rank() == 1) _exit(3);
  rank0_waits();
}

}  // namespace
}  // namespace encore
