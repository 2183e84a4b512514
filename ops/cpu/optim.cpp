// Fused SGD, Adam and RMSprop updates (input layout: ops/defs/optim.cpp). Per-step scalars (bias
// corrections, learning rate) are computed in double, the elementwise update in the
// parameter dtype — the same split as the CUDA kernels.
#include <cmath>

#include "ops/cpu/kernels.h"
#include "ops/optim_math.h"

namespace encore::cpu {
namespace {

void sgd_kernel(const KernelCtx& c) {
  const auto& a = std::get<SgdAttrs>(c.attrs);
  const bool momentum = a.momentum > 0;
  const int n = (static_cast<int>(c.in.size()) - 1) / (momentum ? 3 : 2);
  const double lr = *c.in.back().ptr<const double>();
  for (int p = 0; p < n; ++p) {
    const TensorRef& param = c.in[p];
    const TensorRef& grad = c.in[(momentum ? 2 : 1) * n + p];
    visit_float(param.dtype, [&]<class T>() {
      T* __restrict w = param.ptr<T>();
      const T* __restrict g = grad.ptr<const T>();
      const SgdStep<T> step{T(lr), T(a.momentum), T(a.weight_decay), a.nesterov};
      const int64_t m = param.numel();
      if (momentum) {
        T* __restrict buf = c.in[n + p].ptr<T>();
        for (int64_t i = 0; i < m; ++i) step(w[i], buf[i], g[i], true);
      } else {
        for (int64_t i = 0; i < m; ++i) step(w[i], w[i], g[i], false);
      }
    });
  }
}

void adam_kernel(const KernelCtx& c) {
  const auto& a = std::get<AdamAttrs>(c.attrs);
  const int n = (static_cast<int>(c.in.size()) - 2) / 4;
  const int64_t t = *c.in[c.in.size() - 2].ptr<const int64_t>();
  const double lr = *c.in.back().ptr<const double>();
  const AdamScalars s = adam_scalars(a, t, lr);
  for (int p = 0; p < n; ++p) {
    visit_float(c.in[p].dtype, [&]<class T>() {
      // Distinct tensors: restrict lets the compiler vectorize the update.
      T* __restrict w = c.in[p].ptr<T>();
      T* __restrict m = c.in[n + p].ptr<T>();
      T* __restrict v = c.in[2 * n + p].ptr<T>();
      const T* __restrict g = c.in[3 * n + p].ptr<const T>();
      const AdamStep<T> step(a, s);
      const int64_t count = c.in[p].numel();
      for (int64_t i = 0; i < count; ++i) step(w[i], m[i], v[i], g[i]);
    });
  }
}

void rmsprop_kernel(const KernelCtx& c) {
  const auto& a = std::get<RmspropAttrs>(c.attrs);
  const bool momentum = a.momentum > 0;
  const int groups = 3 + momentum + a.centered;
  const int n = (static_cast<int>(c.in.size()) - 1) / groups;
  const double lr = *c.in.back().ptr<const double>();
  for (int p = 0; p < n; ++p) {
    visit_float(c.in[p].dtype, [&]<class T>() {
      T* w = c.in[p].ptr<T>();
      T* v = c.in[n + p].ptr<T>();
      T* buf = momentum ? c.in[2 * n + p].ptr<T>() : w;
      T* mg = a.centered ? c.in[(2 + momentum) * n + p].ptr<T>() : w;
      const T* g = c.in[(groups - 1) * n + p].ptr<const T>();
      const RmspropStep<T> step(a, lr);
      const int64_t count = c.in[p].numel();
      for (int64_t i = 0; i < count; ++i)
        step(w[i], v[i], momentum ? buf[i] : w[i], a.centered ? mg[i] : w[i], g[i], momentum, a.centered);
    });
  }
}

}  // namespace

void register_optim() {
  set_kernel(OpId::sgd_update, sgd_kernel);
  set_kernel(OpId::adam_update, adam_kernel);
  set_kernel(OpId::rmsprop_update, rmsprop_kernel);
}

}  // namespace encore::cpu
