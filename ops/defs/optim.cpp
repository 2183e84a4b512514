// Fused optimizer updates over all parameters at once (one op per optimizer step, so the
// GPU backend can update every tensor in a single launch). Inputs, in order:
//   sgd_update:  params[n], momentum_buffers[n] (only if momentum > 0), grads[n], lr
//   adam_update: params[n], m[n], v[n], grads[n], step, lr
//   rmsprop_update: params[n], v[n], momentum_buffers[n] (only if momentum > 0),
//                   mean_grads[n] (only if centered), grads[n], lr
// The leading tensors are updated in place. `lr` (float64) and `step` (int64, already
// incremented for this update) are scalar tensors on the parameters' device, so a replayed
// step sees learning-rate changes and the advancing bias correction without retracing.
#include "ops/defs/common.h"

namespace encore {
namespace {

int sgd_params(int num_inputs, const SgdAttrs& a) { return (num_inputs - 1) / (a.momentum > 0 ? 3 : 2); }
int adam_params(int num_inputs) { return (num_inputs - 2) / 4; }
int rmsprop_groups(const RmspropAttrs& a) { return 3 + (a.momentum > 0) + a.centered; }
int rmsprop_params(int num_inputs, const RmspropAttrs& a) { return (num_inputs - 1) / rmsprop_groups(a); }

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
      ENCORE_CHECK(t.shape() == in[i].shape() && t.dtype() == in[i].dtype(), ShapeError, "[", op,
                   "] tensor ", describe(t), " does not match parameter ", i, " ", describe(in[i]));
    }
    ENCORE_CHECK(in[i].is_contiguous(), ValueError, "[", op, "] parameter ", i, " ",
                 describe(in[i]), " must be contiguous");
  }
}

int infer_sgd(std::span<const Tensor> in, const Attrs& attrs, TensorMeta*) {
  const auto& a = std::get<SgdAttrs>(attrs);
  const int groups = a.momentum > 0 ? 3 : 2;
  ENCORE_CHECK((static_cast<int>(in.size()) - 1) % groups == 0, ValueError,
               "[sgd_update] expects ", groups, " tensors per parameter plus lr, got ", in.size());
  const int n = sgd_params(static_cast<int>(in.size()), a);
  check_groups("sgd_update", in, n, groups);
  check_scalar("sgd_update", in.back(), DType::Float64, "lr");
  return 0;
}

int infer_adam(std::span<const Tensor> in, const Attrs&, TensorMeta*) {
  ENCORE_CHECK((in.size() - 2) % 4 == 0, ValueError,
               "[adam_update] expects 4 tensors per parameter plus step and lr, got ", in.size());
  const int n = adam_params(static_cast<int>(in.size()));
  check_groups("adam_update", in, n, 4);
  check_scalar("adam_update", in[in.size() - 2], DType::Int64, "step");
  check_scalar("adam_update", in.back(), DType::Float64, "lr");
  return 0;
}

int infer_rmsprop(std::span<const Tensor> in, const Attrs& attrs, TensorMeta*) {
  const auto& a = std::get<RmspropAttrs>(attrs);
  const int groups = rmsprop_groups(a);
  ENCORE_CHECK((static_cast<int>(in.size()) - 1) % groups == 0, ValueError, "[rmsprop_update] expects ",
               groups, " tensors per parameter plus lr, got ", in.size());
  const int n = rmsprop_params(static_cast<int>(in.size()), a);
  check_groups("rmsprop_update", in, n, groups);
  check_scalar("rmsprop_update", in.back(), DType::Float64, "lr");
  return 0;
}

}  // namespace

void define_optim_ops() {
  OpDef& sgd = defs::define(OpId::sgd_update);
  sgd.kind = OpKind::InPlace;
  sgd.min_inputs = 3;
  sgd.max_inputs = -1;
  sgd.mutated_prefix = [](int num_inputs, const Attrs& attrs) {
    const auto& a = std::get<SgdAttrs>(attrs);
    return (a.momentum > 0 ? 2 : 1) * sgd_params(num_inputs, a);
  };
  sgd.infer = infer_sgd;

  OpDef& adam = defs::define(OpId::adam_update);
  adam.kind = OpKind::InPlace;
  adam.min_inputs = 6;
  adam.max_inputs = -1;
  adam.mutated_prefix = [](int num_inputs, const Attrs&) { return 3 * adam_params(num_inputs); };
  adam.infer = infer_adam;

  OpDef& rmsprop = defs::define(OpId::rmsprop_update);
  rmsprop.kind = OpKind::InPlace;
  rmsprop.min_inputs = 4;
  rmsprop.max_inputs = -1;
  rmsprop.mutated_prefix = [](int num_inputs, const Attrs& attrs) {
    const auto& a = std::get<RmspropAttrs>(attrs);
    return (rmsprop_groups(a) - 1) * rmsprop_params(num_inputs, a);
  };
  rmsprop.infer = infer_rmsprop;
}

}  // namespace encore
