// Numerical gradient checking: compares reverse-mode gradients with central finite
// differences, in float64 on the CPU.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ops/tensor.h"

namespace encore {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-6;
  double rtol = 1e-4;
};

struct GradcheckResult {
  bool ok = true;
  double max_abs_error = 0.0;
  std::string report;  // the worst mismatches, one per line
};

/// Checks d(sum_k <fn(x)_k, r_k>)/dx for random projections r_k against finite differences.
/// Floating inputs get gradients; integer inputs (labels, indices) are passed through.
GradcheckResult gradcheck(const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, GradcheckOptions options = {});

}  // namespace encore
