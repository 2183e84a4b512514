// The op table's cases, one per example of every op's row: the parameters of the table tests
// on the CPU (test_op_table.cpp) and of their CUDA Graph counterpart (test_cuda_capture.cpp).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "ops/registry.h"

namespace encore::test {

/// One example call of one op: the op's name and the example's index in its row's `examples`.
using OpCase = std::pair<std::string, size_t>;

inline std::vector<OpCase> op_cases() {
  std::vector<OpCase> out;
  for (const OpDef* def : all_ops())
    for (size_t i = 0; i < def->examples.size(); ++i) out.emplace_back(def->name, i);
  return out;
}

/// Named after the op, and the edge case's number after its first example ("conv1d_edge2").
inline std::string op_case_name(const testing::TestParamInfo<OpCase>& info) {
  const auto& [name, index] = info.param;
  return index == 0 ? name : name + "_edge" + std::to_string(index);
}

}  // namespace encore::test
