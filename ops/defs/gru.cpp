// The fused GRU cell (the reset_after form; the math: ops/gru_math.h) and its backward: rows,
// shape inference, backward formula, CPU kernels and the public function.
#include "ops/defs/common.h"
#include "ops/gru_math.h"
#include "ops/nn.h"

namespace encore {
namespace {

const OpDef& gru_cell_backward_op();

// gru_cell(xz (B, 3U), hz (B, 3U), h_prev (B, U)) -> h
int infer_gru_cell(const OpDef&, std::span<const Tensor> in, const Attrs&, TensorMeta* out) {
  const Tensor &xz = in[0], &hz = in[1], &h = in[2];
  defs::require_float("gru_cell", xz);
  defs::require_same_dtype("gru_cell", xz, hz);
  defs::require_same_dtype("gru_cell", xz, h);
  ENCORE_CHECK(h.dim() == 2 && xz.shape() == hz.shape() && xz.dim() == 2 &&
                   xz.shape()[0] == h.shape()[0] && xz.shape()[1] == 3 * h.shape()[1],
               ShapeError, "[gru_cell] projections ", xz.shape().str(), " and ", hz.shape().str(),
               " must both be (batch, 3 * units) for state ", h.shape().str());
  out[0] = defs::meta_like(h);
  return 1;
}
void bw_gru_cell(const BackwardCtx& c, Tensor* g) {
  const Tensor in[] = {c.inputs[0], c.inputs[1], c.inputs[2], c.grads[0]};
  const OutList r = dispatch(gru_cell_backward_op(), in, c.attrs);
  for (int i = 0; i < 3; ++i)
    if (c.need(i)) g[i] = r[i];
}

// gru_cell_backward(xz, hz, h_prev, grad_h) -> (grad_xz, grad_hz, grad_h_prev)
int infer_gru_cell_backward(const OpDef&, std::span<const Tensor> in, const Attrs&,
                            TensorMeta* out) {
  ENCORE_CHECK(in[3].shape() == in[2].shape() && in[3].dtype() == in[2].dtype(), ShapeError,
               "[gru_cell_backward] gradient ", describe(in[3]), " does not match the state ",
               describe(in[2]));
  for (int i = 0; i < 3; ++i) out[i] = defs::meta_like(in[i]);
  return 3;
}

template <class T> void gru_cell_cpu(const KernelCtx& c) {
  const auto& a = c.attrs.as<LstmAttrs>();
  const int64_t batch = c.in[2].shape[0], units = c.in[2].shape[1];
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t u = 0; u < units; ++u)
      gru_cell_unit(c.in[0].ptr<const T>(), c.in[1].ptr<const T>(), c.in[2].ptr<const T>(),
                    c.out[0].ptr<T>(), b, u, units, a.activation, a.recurrent_activation);
}

template <class T> void gru_cell_backward_cpu(const KernelCtx& c) {
  const auto& a = c.attrs.as<LstmAttrs>();
  const int64_t batch = c.in[2].shape[0], units = c.in[2].shape[1];
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t u = 0; u < units; ++u)
      gru_cell_backward_unit(c.in[0].ptr<const T>(), c.in[1].ptr<const T>(), c.in[2].ptr<const T>(),
                             c.in[3].ptr<const T>(), c.out[0].ptr<T>(), c.out[1].ptr<T>(),
                             c.out[2].ptr<T>(), b, u, units, a.activation, a.recurrent_activation);
}

OpDef& gru_cell_op = define_op({
    .name = "gru_cell",
    .min_inputs = 3,
    .max_inputs = 3,
    .save = Save::Inputs,
    .contiguous_inputs = true,
    .attrs = &attrs_of<LstmAttrs>,
    .infer = infer_gru_cell,
    .backward = bw_gru_cell,
    .cpu = {[](const KernelCtx& c) {
      visit_float(c.in[0].dtype, [&]<class T>() { gru_cell_cpu<T>(c); });
    }},
    .signature = "gru_cell(xz: Tensor, hz: Tensor, h_prev: Tensor, activation: str = 'tanh', "
                 "recurrent_activation: str = 'sigmoid') -> Tensor",
    .invoke = [](const CallArgs& a) -> Outputs {
      return {gru_cell(a.tensor(0), a.tensor(1), a.tensor(2), parse_activation(a.string(3)),
                       parse_activation(a.string(4)))};
    },
    .doc =
        "One fused GRU step (Keras reset_after=True) on the input projection xz = x W + b_in and "
        "the recurrent one hz = h_prev R + b_rec, both (batch, 3*units) in gate order z, r, h: "
        "returns the new state",
    .examples = {{.inputs = {{{2, 9}}, {{2, 9}}, {{2, 3}}}}},
});
OpDef& gru_cell_backward_row = define_op({
    .name = "gru_cell_backward",
    .min_inputs = 4,
    .max_inputs = 4,
    .contiguous_inputs = true,
    .attrs = &attrs_of<LstmAttrs>,
    .infer = infer_gru_cell_backward,
    .cpu = {[](const KernelCtx& c) {
      visit_float(c.in[0].dtype, [&]<class T>() { gru_cell_backward_cpu<T>(c); });
    }},
    .examples = {{.inputs = {{{2, 9}}, {{2, 9}}, {{2, 3}}, {{2, 3}}},
                  .call = [](std::span<const Tensor> x) -> Outputs {
                    const OutList r = dispatch(gru_cell_backward_op(), x,
                                               LstmAttrs{Activation::Tanh, Activation::Sigmoid});
                    return {r[0], r[1], r[2]};
                  }}},
});
const OpDef& gru_cell_backward_op() { return gru_cell_backward_row; }

}  // namespace

Tensor gru_cell(const Tensor& xz, const Tensor& hz, const Tensor& h_prev, Activation activation,
                Activation recurrent_activation) {
  return call(gru_cell_op, {xz, hz, h_prev}, LstmAttrs{activation, recurrent_activation});
}

}  // namespace encore
