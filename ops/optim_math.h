// The per-element optimizer updates, shared by the CPU and CUDA kernels (PyTorch's
// formulation: L2 weight decay added to the gradient, or decoupled as in AdamW; Adam's bias
// corrections folded into the step size and the denominator; RMSprop as Keras writes it).
#pragma once

#include <string>

#include "core/error.h"
#include "ops/functors.h"

namespace encore {

struct SgdAttrs {
  double momentum, weight_decay;
  bool nesterov;
  std::string str() const {
    return detail::cat("momentum=", momentum, ", weight_decay=", weight_decay,
                       nesterov ? ", nesterov" : "");
  }
  bool operator==(const SgdAttrs&) const = default;
};
struct AdamAttrs {
  double beta1, beta2, eps, weight_decay;
  bool decoupled_weight_decay = false;  // AdamW: w *= 1 - lr * weight_decay, not g += wd * w
  bool epsilon_hat = false;             // Keras' placement: eps added before bias correction
  std::string str() const {
    return detail::cat("beta1=", beta1, ", beta2=", beta2, ", eps=", eps,
                       ", weight_decay=", weight_decay, decoupled_weight_decay ? ", decoupled" : "",
                       epsilon_hat ? ", epsilon_hat" : "");
  }
  bool operator==(const AdamAttrs&) const = default;
};
struct RmspropAttrs {
  double rho, momentum, eps;
  bool centered;
  std::string str() const {
    return detail::cat("rho=", rho, ", momentum=", momentum, ", eps=", eps,
                       centered ? ", centered" : "");
  }
  bool operator==(const RmspropAttrs&) const = default;
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
  double step_size;     // lr / (1 - beta1^t)
  double inv_sqrt_bc2;  // 1 / sqrt(1 - beta2^t)
  double decay;         // AdamW: 1 - lr * weight_decay
};

ENCORE_HD AdamScalars adam_scalars(const AdamAttrs& a, int64_t t, double lr) {
  const double bc1 = 1.0 - ::pow(a.beta1, static_cast<double>(t));
  const double bc2 = 1.0 - ::pow(a.beta2, static_cast<double>(t));
  return {lr / bc1, 1.0 / ::sqrt(bc2), 1.0 - lr * a.weight_decay};
}

// 1 - beta is formed in double: in float32, 1 - 0.999f loses four digits to cancellation.
// epsilon_hat (Keras, TensorFlow): w -= lr / bc1 * m / ((sqrt(v) + eps) / sqrt(bc2)), i.e. eps
// before the bias correction, which makes it sqrt(bc2) times smaller than PyTorch's in the
// first steps; the same for large gradients, up to ~3x apart for gradients near eps.
template <class T> struct AdamStep {
  T beta1, beta2, one_minus_beta1, one_minus_beta2, eps, weight_decay, step_size, inv_sqrt_bc2,
      decay;
  bool decoupled, epsilon_hat;
  ENCORE_HD AdamStep(const AdamAttrs& a, const AdamScalars& s)
      : beta1(T(a.beta1)),
        beta2(T(a.beta2)),
        one_minus_beta1(T(1.0 - a.beta1)),
        one_minus_beta2(T(1.0 - a.beta2)),
        eps(T(a.eps)),
        weight_decay(T(a.weight_decay)),
        step_size(T(s.step_size)),
        inv_sqrt_bc2(T(s.inv_sqrt_bc2)),
        decay(T(s.decay)),
        decoupled(a.decoupled_weight_decay),
        epsilon_hat(a.epsilon_hat) {}
  ENCORE_HD void operator()(T& w, T& m, T& v, T g) const {
    if (decoupled)
      w *= decay;
    else
      g += weight_decay * w;
    m = beta1 * m + one_minus_beta1 * g;
    v = beta2 * v + one_minus_beta2 * g * g;
    const T denom =
        epsilon_hat ? (fn::m_sqrt(v) + eps) * inv_sqrt_bc2 : fn::m_sqrt(v) * inv_sqrt_bc2 + eps;
    w -= step_size * m / denom;
  }
};

// Keras' RMSprop: eps inside the square root; the centered form divides by the estimated
// variance (v - mean(g)^2); momentum accumulates the increments.
template <class T> struct RmspropStep {
  T lr, rho, one_minus_rho, momentum, eps;
  ENCORE_HD RmspropStep(const RmspropAttrs& a, double lr_)
      : lr(T(lr_)),
        rho(T(a.rho)),
        one_minus_rho(T(1.0 - a.rho)),
        momentum(T(a.momentum)),
        eps(T(a.eps)) {}
  // `buf` and `mg` alias `w` when the op has no such buffers; they are then not touched.
  ENCORE_HD void operator()(T& w, T& v, T& buf, T& mg, T g, bool has_momentum,
                            bool centered) const {
    v = rho * v + one_minus_rho * g * g;
    T denom = v;
    if (centered) {
      mg = rho * mg + one_minus_rho * g;
      denom -= mg * mg;
    }
    const T increment = lr * g / fn::m_sqrt(denom + eps);
    if (has_momentum) {
      buf = momentum * buf + increment;
      w -= buf;
    } else {
      w -= increment;
    }
  }
};

}  // namespace encore
