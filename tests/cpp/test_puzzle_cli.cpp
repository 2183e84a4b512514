// The puzzles' shared wording (examples/puzzles/puzzle_cli.h): a conclusion says that ways
// converge only where their times do (issue 28: "converge" next to traced at 14x eager).
#include <gtest/gtest.h>

#include "examples/puzzles/puzzle_cli.h"

TEST(PuzzleConclusion, WaysConvergeOnlyWhereTheirTimesDo) {
  EXPECT_EQ(examples::agreement({2000, 2100, 1900}, 0.9),
            "the kernels dominate and the ways converge (within 11%)");
  const std::string far = examples::agreement({2000, 28000, 1900}, 0.9);
  EXPECT_EQ(far.find("converge"), std::string::npos) << far;
  EXPECT_NE(far.find("differ by up to 14.7x although kernels are 90% of an eager call"),
            std::string::npos)
      << far;
}
