// The per-element optimizer updates, shared by the CPU and CUDA kernels (PyTorch's
// formulation: L2 weight decay added to the gradient; Adam's bias corrections folded into
// the step size and the denominator).
#pragma once

#include <string>

#include "core/error.h"
#include "ops/functors.h"

namespace encore {

struct SgdAttrs {
  double momentum, weight_decay;
  bool nesterov;
  std::string str() const {
    return detail::cat("momentum=", momentum, ", weight_decay=", weight_decay, nesterov ? ", nesterov" : "");
  }
  bool operator==(const SgdAttrs&) const = default;
};
struct AdamAttrs {
  double beta1, beta2, eps, weight_decay;
  std::string str() const {
    return detail::cat("beta1=", beta1, ", beta2=", beta2, ", eps=", eps, ", weight_decay=", weight_decay);
  }
  bool operator==(const AdamAttrs&) const = default;
};

template <class T> struct SgdStep {
  T lr, momentum, weight_decay;
  bool nesterov;
  // `buf` aliases `w` when there is no momentum buffer; it is then not touched.
  ENCORE_HD void operator()(T& w, T& buf, T g, bool has_momentum) const {
    g += weight_decay * w;
    if (has_momentum) {
      buf = momentum * buf + g;
      g = nesterov ? g + momentum * buf : buf;
    }
    w -= lr * g;
  }
};

struct AdamScalars {
  double step_size;        // lr / (1 - beta1^t)
  double inv_sqrt_bc2;     // 1 / sqrt(1 - beta2^t)
};

ENCORE_HD AdamScalars adam_scalars(const AdamAttrs& a, int64_t t, double lr) {
  const double bc1 = 1.0 - ::pow(a.beta1, static_cast<double>(t));
  const double bc2 = 1.0 - ::pow(a.beta2, static_cast<double>(t));
  return {lr / bc1, 1.0 / ::sqrt(bc2)};
}

// 1 - beta is formed in double: in float32, 1 - 0.999f loses four digits to cancellation.
template <class T> struct AdamStep {
  T beta1, beta2, one_minus_beta1, one_minus_beta2, eps, weight_decay, step_size, inv_sqrt_bc2;
  ENCORE_HD AdamStep(const AdamAttrs& a, const AdamScalars& s)
      : beta1(T(a.beta1)), beta2(T(a.beta2)), one_minus_beta1(T(1.0 - a.beta1)),
        one_minus_beta2(T(1.0 - a.beta2)), eps(T(a.eps)), weight_decay(T(a.weight_decay)),
        step_size(T(s.step_size)), inv_sqrt_bc2(T(s.inv_sqrt_bc2)) {}
  ENCORE_HD void operator()(T& w, T& m, T& v, T g) const {
    g += weight_decay * w;
    m = beta1 * m + one_minus_beta1 * g;
    v = beta2 * v + one_minus_beta2 * g * g;
    w -= step_size * m / (fn::m_sqrt(v) * inv_sqrt_bc2 + eps);
  }
};

}  // namespace encore
