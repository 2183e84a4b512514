// Neural-network building blocks: softmax family, dropout, gather/scatter along the last
// axis (sparse cross-entropy), and the fused LSTM cell with its backward.
#include "ops/defs/common.h"

namespace encore {
namespace {

using defs::meta_like;

template <OpId Op> int infer_softmax(std::span<const Tensor> in, const Attrs& a, TensorMeta* out) {
  defs::require_float(op_name(Op), in[0]);
  const int axis = std::get<AxisAttrs>(a).axis;
  ENCORE_CHECK(axis >= 0 && axis < in[0].dim(), ShapeError, "[", op_name(Op), "] axis ", axis,
               " out of range for ", describe(in[0]));
  out[0] = meta_like(in[0]);
  return 1;
}
void bw_softmax(const BackwardCtx& c, Tensor* g) {
  const int axis = std::get<AxisAttrs>(c.attrs).axis;
  const Tensor& y = c.outputs[0];
  g[0] = y * (c.grads[0] - sum(c.grads[0] * y, {axis}, true));
}
void bw_log_softmax(const BackwardCtx& c, Tensor* g) {
  const int axis = std::get<AxisAttrs>(c.attrs).axis;
  g[0] = c.grads[0] - exp(c.outputs[0]) * sum(c.grads[0], {axis}, true);
}

// dropout(x, generator_state) -> (y, mask); mask holds 0 or 1/(1-p).
int infer_dropout(std::span<const Tensor> in, const Attrs& a, TensorMeta* out) {
  defs::require_float("dropout", in[0]);
  const double p = std::get<DropoutAttrs>(a).p;
  ENCORE_CHECK(p >= 0.0 && p < 1.0, ValueError, "[dropout] rate must be in [0, 1), got ", p);
  ENCORE_CHECK(in[1].dtype() == DType::Int64 && in[1].numel() == 2, DTypeError,
               "[dropout] second input must be a generator state, got ", describe(in[1]));
  out[0] = out[1] = meta_like(in[0]);
  return 2;
}
void bw_dropout(const BackwardCtx& c, Tensor* g) {
  if (c.grads[0].defined()) g[0] = c.grads[0] * c.outputs[1];
}

void check_index(const char* op, const Tensor& index) {
  ENCORE_CHECK(index.dtype() == DType::Int32 || index.dtype() == DType::Int64, DTypeError, "[", op,
               "] indices must be int32 or int64, got ", describe(index));
}

// gather_last(x (..., n), index (...)) -> (...)
int infer_gather_last(std::span<const Tensor> in, const Attrs&, TensorMeta* out) {
  const Tensor &x = in[0], &index = in[1];
  check_index("gather_last", index);
  Shape rows(std::span<const int64_t>(x.shape().begin(), std::max(x.dim() - 1, 0)));
  ENCORE_CHECK(x.dim() >= 1 && index.shape() == rows, ShapeError, "[gather_last] indices ",
               index.shape().str(), " must have the shape of ", x.shape().str(), " without its last axis");
  // Every index is out of range then (the CUDA kernel would not even look at them).
  ENCORE_CHECK(x.shape().back() > 0 || index.numel() == 0, ValueError,
               "[gather_last] cannot pick entries from the empty last axis of ", x.shape().str());
  out[0] = defs::meta(rows, x.dtype(), x.device());
  return 1;
}
void bw_gather_last(const BackwardCtx& c, Tensor* g) {
  g[0] = scatter_last(c.grads[0], c.inputs[1], c.input_shape(0).back());
}

// scatter_last(g (...), index (...); n) -> (..., n)
int infer_scatter_last(std::span<const Tensor> in, const Attrs& a, TensorMeta* out) {
  check_index("scatter_last", in[1]);
  ENCORE_CHECK(in[0].shape() == in[1].shape(), ShapeError, "[scatter_last] values ",
               in[0].shape().str(), " and indices ", in[1].shape().str(), " differ in shape");
  Shape s = in[0].shape();
  s.push_back(std::get<ScatterAttrs>(a).n);
  out[0] = defs::meta(s, in[0].dtype(), in[0].device());
  return 1;
}
void bw_scatter_last(const BackwardCtx& c, Tensor* g) { g[0] = gather_last(c.grads[0], c.inputs[1]); }

// lstm_cell(z (B, 4U), c_prev (B, U)) -> (h, c)
int infer_lstm_cell(std::span<const Tensor> in, const Attrs&, TensorMeta* out) {
  const Tensor &z = in[0], &c = in[1];
  defs::require_float("lstm_cell", z);
  defs::require_same_dtype("lstm_cell", z, c);
  ENCORE_CHECK(z.dim() == 2 && c.dim() == 2 && z.shape()[0] == c.shape()[0] &&
                   z.shape()[1] == 4 * c.shape()[1],
               ShapeError, "[lstm_cell] gates ", z.shape().str(), " must be (batch, 4 * units) for state ",
               c.shape().str());
  out[0] = out[1] = meta_like(c);
  return 2;
}
void bw_lstm_cell(const BackwardCtx& c, Tensor* g) {
  const Tensor& state = c.outputs[1];
  auto grad = [&](int i) { return c.grads[i].defined() ? c.grads[i] : zeros_like(state); };
  const Tensor in[] = {c.inputs[0], c.inputs[1], state, grad(0), grad(1)};
  const OutList r = dispatch(OpId::lstm_cell_backward, in, c.attrs);
  g[0] = r[0];
  g[1] = r[1];
}

// lstm_cell_backward(z, c_prev, c, grad_h, grad_c) -> (grad_z, grad_c_prev)
int infer_lstm_cell_backward(std::span<const Tensor> in, const Attrs&, TensorMeta* out) {
  for (int i = 2; i < 5; ++i)
    ENCORE_CHECK(in[i].shape() == in[1].shape() && in[i].dtype() == in[1].dtype(), ShapeError,
                 "[lstm_cell_backward] input ", i, " ", describe(in[i]), " does not match the state ",
                 describe(in[1]));
  out[0] = meta_like(in[0]);
  out[1] = meta_like(in[1]);
  return 2;
}

}  // namespace

void define_nn_ops() {
  OpDef& sm = defs::define(OpId::softmax);
  sm.contiguous_inputs = true;
  sm.infer = infer_softmax<OpId::softmax>;
  sm.backward = bw_softmax;
  sm.save_outputs = true;
  OpDef& lsm = defs::define(OpId::log_softmax);
  lsm.contiguous_inputs = true;
  lsm.infer = infer_softmax<OpId::log_softmax>;
  lsm.backward = bw_log_softmax;
  lsm.save_outputs = true;

  OpDef& d = defs::define(OpId::dropout);
  d.contiguous_inputs = true;
  d.min_inputs = d.max_inputs = 2;
  d.mutates = 0b10;
  d.nondiff = 0b10;
  d.infer = infer_dropout;
  d.backward = bw_dropout;
  d.save_outputs = true;

  OpDef& gl = defs::define(OpId::gather_last);
  gl.contiguous_inputs = true;
  gl.min_inputs = gl.max_inputs = 2;
  gl.nondiff = 0b10;
  gl.infer = infer_gather_last;
  gl.backward = bw_gather_last;
  gl.save_inputs = true;
  OpDef& sl = defs::define(OpId::scatter_last);
  sl.contiguous_inputs = true;
  sl.min_inputs = sl.max_inputs = 2;
  sl.nondiff = 0b10;
  sl.infer = infer_scatter_last;
  sl.backward = bw_scatter_last;
  sl.save_inputs = true;

  OpDef& lc = defs::define(OpId::lstm_cell);
  lc.contiguous_inputs = true;
  lc.min_inputs = lc.max_inputs = 2;
  lc.infer = infer_lstm_cell;
  lc.backward = bw_lstm_cell;
  lc.save_inputs = lc.save_outputs = true;
  OpDef& lb = defs::define(OpId::lstm_cell_backward);
  lb.contiguous_inputs = true;
  lb.min_inputs = lb.max_inputs = 5;
  lb.infer = infer_lstm_cell_backward;
}

}  // namespace encore
