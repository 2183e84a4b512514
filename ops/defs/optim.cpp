// Fused optimizer updates over all parameters at once (one op per optimizer step, so the
// GPU backend can update every tensor in a single launch): rows, shape inference, CPU kernels
// (per-step scalars in double, the elementwise update in the parameter dtype — the same split
// as the CUDA kernels) and the functions optimizers call. Inputs, in order:
//   sgd_update:  params[n], momentum_buffers[n] (only if momentum > 0), grads[n], lr
//   adam_update: params[n], m[n], v[n], grads[n], step, lr
//   rmsprop_update: params[n], v[n], momentum_buffers[n] (only if momentum > 0),
//                   mean_grads[n] (only if centered), grads[n], lr
// The leading tensors are updated in place. `lr` (float64) and `step` (int64, already
// incremented for this update) are scalar tensors on the parameters' device, so a replayed
// step sees learning-rate changes and the advancing bias correction without retracing.
#include <cmath>

#include "core/modes.h"
#include "core/parallel.h"
#include "ops/defs/common.h"
#include "ops/optim.h"

namespace encore {
namespace {

int sgd_params(int num_inputs, const SgdAttrs& a) {
  return (num_inputs - 1) / (a.momentum > 0 ? 3 : 2);
}
int adam_params(int num_inputs) { return (num_inputs - 2) / 4; }
int rmsprop_groups(const RmspropAttrs& a) { return 3 + (a.momentum > 0) + a.centered; }
int rmsprop_params(int num_inputs, const RmspropAttrs& a) {
  return (num_inputs - 1) / rmsprop_groups(a);
}

void check_scalar(const char* op, const Tensor& t, DType dtype, const char* what) {
  ENCORE_CHECK(t.numel() == 1 && t.dtype() == dtype, DTypeError, "[", op, "] ", what, " must be a ",
               name(dtype), " scalar tensor, got ", describe(t));
}

// Every group of n tensors must match the parameters one to one.
void check_groups(const char* op, std::span<const Tensor> in, int n, int groups) {
  ENCORE_CHECK(n >= 1, ValueError, "[", op, "] needs at least one parameter");
  for (int i = 0; i < n; ++i) {
    defs::require_float(op, in[i]);
    for (int g = 1; g < groups; ++g) {
      const Tensor& t = in[g * n + i];
      ENCORE_CHECK(t.shape() == in[i].shape(), ShapeError, "[", op, "] tensor ", describe(t),
                   " does not match the shape of parameter ", i, " ", describe(in[i]));
      ENCORE_CHECK(t.dtype() == in[i].dtype(), DTypeError, "[", op, "] tensor ", describe(t),
                   " does not match the dtype of parameter ", i, " ", describe(in[i]));
    }
    ENCORE_CHECK(in[i].is_contiguous(), ValueError, "[", op, "] parameter ", i, " ",
                 describe(in[i]), " must be contiguous");
  }
}

int infer_sgd(const OpDef&, std::span<const Tensor> in, const Attrs& attrs, TensorMeta*) {
  const auto& a = attrs.as<SgdAttrs>();
  const int groups = a.momentum > 0 ? 3 : 2;
  ENCORE_CHECK((static_cast<int>(in.size()) - 1) % groups == 0, ValueError, "[sgd_update] expects ",
               groups, " tensors per parameter plus lr, got ", in.size());
  const int n = sgd_params(static_cast<int>(in.size()), a);
  check_groups("sgd_update", in, n, groups);
  check_scalar("sgd_update", in.back(), DType::Float64, "lr");
  return 0;
}

int infer_adam(const OpDef&, std::span<const Tensor> in, const Attrs&, TensorMeta*) {
  ENCORE_CHECK((in.size() - 2) % 4 == 0, ValueError,
               "[adam_update] expects 4 tensors per parameter plus step and lr, got ", in.size());
  const int n = adam_params(static_cast<int>(in.size()));
  check_groups("adam_update", in, n, 4);
  check_scalar("adam_update", in[in.size() - 2], DType::Int64, "step");
  check_scalar("adam_update", in.back(), DType::Float64, "lr");
  return 0;
}

int infer_rmsprop(const OpDef&, std::span<const Tensor> in, const Attrs& attrs, TensorMeta*) {
  const auto& a = attrs.as<RmspropAttrs>();
  const int groups = rmsprop_groups(a);
  ENCORE_CHECK((static_cast<int>(in.size()) - 1) % groups == 0, ValueError,
               "[rmsprop_update] expects ", groups, " tensors per parameter plus lr, got ",
               in.size());
  const int n = rmsprop_params(static_cast<int>(in.size()), a);
  check_groups("rmsprop_update", in, n, groups);
  check_scalar("rmsprop_update", in.back(), DType::Float64, "lr");
  return 0;
}

void sgd_kernel(const KernelCtx& c) {
  const auto& a = c.attrs.as<SgdAttrs>();
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

// Below this many elements a parameter's update stays on the calling thread: waking the pool's
// sleeping workers (OMP_WAIT_POLICY=PASSIVE) cost as much as it saved on the small model's
// 154k-element kernel (117 us either way); the BiLSTM's 2^20..2^23-element kernels gain.
constexpr int64_t kParallelUpdate = int64_t{1} << 20;

void adam_kernel(const KernelCtx& c) {
  const auto& a = c.attrs.as<AdamAttrs>();
  const int n = (static_cast<int>(c.in.size()) - 2) / 4;
  const int64_t t = *c.in[c.in.size() - 2].ptr<const int64_t>();
  const double lr = *c.in.back().ptr<const double>();
  const AdamScalars s = adam_scalars(a, t, lr);
  for (int p = 0; p < n; ++p) {
    visit_float(c.in[p].dtype, [&]<class T>() {
      const AdamStep<T> step(a, s);
      // Elements are independent: a large parameter's update splits over the pool.
      parallel_for(c.in[p].numel(), kParallelUpdate, [&](int64_t begin, int64_t end) noexcept {
        // Distinct tensors: restrict lets the compiler vectorize the update.
        T* __restrict w = c.in[p].ptr<T>() + begin;
        T* __restrict m = c.in[n + p].ptr<T>() + begin;
        T* __restrict v = c.in[2 * n + p].ptr<T>() + begin;
        const T* __restrict g = c.in[3 * n + p].ptr<const T>() + begin;
        const AdamStep<T> local = step;  // a local copy, which no store through w can change
        for (int64_t i = 0; i < end - begin; ++i) local(w[i], m[i], v[i], g[i]);
      });
    });
  }
}

void rmsprop_kernel(const KernelCtx& c) {
  const auto& a = c.attrs.as<RmspropAttrs>();
  const bool momentum = a.momentum > 0;
  const int groups = rmsprop_groups(a);
  const int n = (static_cast<int>(c.in.size()) - 1) / groups;
  const double lr = *c.in.back().ptr<const double>();
  for (int p = 0; p < n; ++p) {
    visit_float(c.in[p].dtype, [&]<class T>() {
      // The optional buffers alias w when absent (RmspropStep then leaves them alone), so
      // these pointers may alias: no restrict.
      T* w = c.in[p].ptr<T>();
      T* v = c.in[n + p].ptr<T>();
      T* buf = momentum ? c.in[2 * n + p].ptr<T>() : w;
      T* mg = a.centered ? c.in[(2 + momentum) * n + p].ptr<T>() : w;
      const T* g = c.in[(groups - 1) * n + p].ptr<const T>();
      const RmspropStep<T> step(a, lr);
      const int64_t count = c.in[p].numel();
      for (int64_t i = 0; i < count; ++i)
        step(w[i], v[i], momentum ? buf[i] : w[i], a.centered ? mg[i] : w[i], g[i], momentum,
             a.centered);
    });
  }
}

// The examples update copies of random parameters with random gradients, so every replay and
// backend starts from the same values.
Outputs sgd_example(std::span<const Tensor> x) {
  const Tensor w[] = {x[0].detach().clone()}, buf[] = {zeros_like(w[0])};
  const Tensor lr = full({}, 0.1, DType::Float64, w[0].device());
  for (int i = 0; i < 2; ++i) sgd_update(w, buf, x.subspan(1, 1), lr, SgdAttrs{0.9, 0.01, true});
  return {w[0], buf[0]};
}
// Both placements of epsilon and both kinds of weight decay (L2 and AdamW's decoupled one).
Outputs adam_example(std::span<const Tensor> x) {
  Outputs out;
  for (const bool keras : {false, true}) {
    const Tensor w[] = {x[0].detach().clone()}, m[] = {zeros_like(w[0])}, v[] = {zeros_like(w[0])};
    const Tensor step = full({}, 3, DType::Int64, w[0].device()),
                 lr = full({}, 0.01, DType::Float64, w[0].device());
    adam_update(w, m, v, x.subspan(1, 1), step, lr,
                AdamAttrs{0.9, 0.999, 1e-7, 0.01, keras, keras});
    out.insert(out.end(), {w[0], m[0], v[0]});
  }
  return out;
}
// Centered with momentum: every buffer of the op.
Outputs rmsprop_example(std::span<const Tensor> x) {
  const Tensor w[] = {x[0].detach().clone()}, v[] = {zeros_like(w[0])}, buf[] = {zeros_like(w[0])},
               mg[] = {zeros_like(w[0])};
  const Tensor lr = full({}, 0.01, DType::Float64, w[0].device());
  for (int i = 0; i < 2; ++i)
    rmsprop_update(w, v, buf, mg, x.subspan(1, 1), lr, RmspropAttrs{0.9, 0.5, 1e-7, true});
  return {w[0], v[0], buf[0], mg[0]};
}

OpDef& sgd_update_op = define_op({
    .name = "sgd_update",
    .kind = OpKind::InPlace,
    .min_inputs = 3,
    .max_inputs = -1,
    .mutated_prefix =
        [](int num_inputs, const Attrs& attrs) {
          const auto& a = attrs.as<SgdAttrs>();
          return (a.momentum > 0 ? 2 : 1) * sgd_params(num_inputs, a);
        },
    .attrs = &attrs_of<SgdAttrs>,
    .infer = infer_sgd,
    .cpu = {sgd_kernel},
    .examples = {{.inputs = {{{3, 4}}, {{3, 4}}}, .call = sgd_example}},
});
OpDef& adam_update_op = define_op({
    .name = "adam_update",
    .kind = OpKind::InPlace,
    .min_inputs = 6,
    .max_inputs = -1,
    .mutated_prefix = [](int num_inputs, const Attrs&) { return 3 * adam_params(num_inputs); },
    .attrs = &attrs_of<AdamAttrs>,
    .infer = infer_adam,
    .cpu = {adam_kernel},
    .examples = {{.inputs = {{{3, 4}}, {{3, 4}}}, .call = adam_example}},
});
OpDef& rmsprop_update_op = define_op({
    .name = "rmsprop_update",
    .kind = OpKind::InPlace,
    .min_inputs = 4,
    .max_inputs = -1,
    .mutated_prefix =
        [](int num_inputs, const Attrs& attrs) {
          const auto& a = attrs.as<RmspropAttrs>();
          return (rmsprop_groups(a) - 1) * rmsprop_params(num_inputs, a);
        },
    .attrs = &attrs_of<RmspropAttrs>,
    .infer = infer_rmsprop,
    .cpu = {rmsprop_kernel},
    .examples = {{.inputs = {{{3, 4}}, {{3, 4}}}, .call = rmsprop_example}},
});

std::vector<Tensor> joined(std::initializer_list<std::span<const Tensor>> groups) {
  std::vector<Tensor> in;
  for (const auto& g : groups) in.insert(in.end(), g.begin(), g.end());
  return in;
}

}  // namespace

void sgd_update(std::span<const Tensor> params, std::span<const Tensor> momentum,
                std::span<const Tensor> grads, const Tensor& lr, const SgdAttrs& options) {
  std::vector<Tensor> in = joined({params, momentum, grads});
  in.push_back(lr);
  dispatch(sgd_update_op, in, options);
}

void adam_update(std::span<const Tensor> params, std::span<const Tensor> m,
                 std::span<const Tensor> v, std::span<const Tensor> grads, const Tensor& step,
                 const Tensor& lr, const AdamAttrs& options) {
  std::vector<Tensor> in = joined({params, m, v, grads});
  in.push_back(step);
  in.push_back(lr);
  dispatch(adam_update_op, in, options);
}

void rmsprop_update(std::span<const Tensor> params, std::span<const Tensor> v,
                    std::span<const Tensor> momentum, std::span<const Tensor> mean_grads,
                    std::span<const Tensor> grads, const Tensor& lr, const RmspropAttrs& options) {
  std::vector<Tensor> in = joined({params, v, momentum, mean_grads, grads});
  in.push_back(lr);
  dispatch(rmsprop_update_op, in, options);
}

void zero_grads(std::span<Tensor> params, bool set_to_none) {
  for (Tensor& p : params) {
    if (set_to_none) {
      p.set_grad(Tensor());
      continue;
    }
    Tensor g = p.grad();
    if (!g.defined()) continue;
    NoGradGuard no_grad;
    g.zero_();
  }
}

}  // namespace encore
