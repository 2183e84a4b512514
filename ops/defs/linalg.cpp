// matmul and the three 1-D convolution ops (forward, gradient w.r.t. data and filter).
#include "ops/defs/common.h"

namespace encore {
namespace {

int infer_matmul(std::span<const Tensor> in, const Attrs&, TensorMeta* out) {
  const Tensor &a = in[0], &b = in[1];
  defs::require_float("matmul", a);
  defs::require_same_dtype("matmul", a, b);
  ENCORE_CHECK(a.dim() >= 2 && b.dim() >= 2, ShapeError, "[matmul] needs operands of rank >= 2, got ",
               a.shape().str(), " and ", b.shape().str());
  const int64_t k = a.shape().back(), k2 = b.shape()[b.dim() - 2];
  ENCORE_CHECK(k == k2, ShapeError, "[matmul] ", a.shape().str(), " @ ", b.shape().str(),
               ": inner dimensions differ (", k, " vs ", k2, ")");
  Shape ba(std::span<const int64_t>(a.shape().begin(), a.dim() - 2));
  Shape bb(std::span<const int64_t>(b.shape().begin(), b.dim() - 2));
  Shape shape = broadcast_shapes(ba, bb, "matmul");
  shape.push_back(a.shape()[a.dim() - 2]);
  shape.push_back(b.shape().back());
  out[0] = defs::meta(shape, a.dtype(), a.device());
  return 1;
}

void bw_matmul(const BackwardCtx& c, Tensor* g) {
  const Tensor &a = c.inputs[0], &b = c.inputs[1];
  if (c.need(0)) g[0] = sum_to(matmul(c.grads[0], b.transpose(-1, -2)), c.input_shape(0));
  if (c.need(1)) g[1] = sum_to(matmul(a.transpose(-1, -2), c.grads[0]), c.input_shape(1));
}

int64_t conv_out_length(int64_t length, int64_t kernel, const ConvAttrs& a) {
  return conv1d_output_length(length, kernel, a.stride, a.dilation, a.pad_l, a.pad_r);
}

void check_conv_attrs(const char* op, const ConvAttrs& a, int64_t kernel) {
  ENCORE_CHECK(a.stride >= 1 && a.dilation >= 1 && a.pad_l >= 0 && a.pad_r >= 0, ValueError,
               "[", op, "] stride and dilation must be >= 1 and padding >= 0, got ", a.str());
  ENCORE_CHECK(kernel >= 1, ValueError, "[", op, "] kernel size must be >= 1, got ", kernel);
}

int infer_conv1d(std::span<const Tensor> in, const Attrs& attrs, TensorMeta* out) {
  const Tensor &x = in[0], &w = in[1];
  const auto& a = std::get<ConvAttrs>(attrs);
  defs::require_float("conv1d", x);
  defs::require_same_dtype("conv1d", x, w);
  ENCORE_CHECK(x.dim() == 3, ShapeError, "[conv1d] input must be (batch, steps, channels), got ",
               x.shape().str());
  ENCORE_CHECK(w.dim() == 3, ShapeError,
               "[conv1d] kernel must be (kernel_size, in_channels, filters), got ", w.shape().str());
  check_conv_attrs("conv1d", a, w.shape()[0]);
  ENCORE_CHECK(x.shape()[2] == w.shape()[1], ShapeError, "[conv1d] input ", x.shape().str(), " has ",
               x.shape()[2], " channels but the kernel ", w.shape().str(), " expects ", w.shape()[1]);
  const int64_t len = conv_out_length(x.shape()[1], w.shape()[0], a);
  ENCORE_CHECK(len >= 1, ShapeError, "[conv1d] input ", x.shape().str(),
               " is too short for kernel size ", w.shape()[0], " with ", a.str());
  out[0] = defs::meta({x.shape()[0], len, w.shape()[2]}, x.dtype(), x.device());
  return 1;
}

void bw_conv1d(const BackwardCtx& c, Tensor* g) {
  ConvAttrs a = std::get<ConvAttrs>(c.attrs);
  a.length = c.input_shape(0)[1];
  a.kernel = c.input_shape(1)[0];
  if (c.need(0)) g[0] = call(OpId::conv1d_backward_data, {c.grads[0], c.inputs[1]}, a);
  if (c.need(1)) g[1] = call(OpId::conv1d_backward_filter, {c.inputs[0], c.grads[0]}, a);
}

// (grad_out (N, Lout, F), w (K, C, F)) -> grad_x (N, length, C)
int infer_conv1d_backward_data(std::span<const Tensor> in, const Attrs& attrs, TensorMeta* out) {
  const Tensor &gy = in[0], &w = in[1];
  const auto& a = std::get<ConvAttrs>(attrs);
  defs::require_same_dtype("conv1d_backward_data", gy, w);
  ENCORE_CHECK(w.dim() == 3, ShapeError, "[conv1d_backward_data] kernel must be (kernel_size, "
               "in_channels, filters), got ", w.shape().str());
  check_conv_attrs("conv1d_backward_data", a, w.shape()[0]);
  ENCORE_CHECK(gy.dim() == 3 && gy.shape()[2] == w.shape()[2] && a.length >= 0 &&
                   conv_out_length(a.length, w.shape()[0], a) == gy.shape()[1],
               ShapeError, "[conv1d_backward_data] gradient ", gy.shape().str(),
               " does not match kernel ", w.shape().str(), " and input length ", a.length);
  out[0] = defs::meta({gy.shape()[0], a.length, w.shape()[1]}, gy.dtype(), gy.device());
  return 1;
}

// (x (N, L, C), grad_out (N, Lout, F)) -> grad_w (kernel, C, F)
int infer_conv1d_backward_filter(std::span<const Tensor> in, const Attrs& attrs, TensorMeta* out) {
  const Tensor &x = in[0], &gy = in[1];
  const auto& a = std::get<ConvAttrs>(attrs);
  check_conv_attrs("conv1d_backward_filter", a, a.kernel);
  defs::require_same_dtype("conv1d_backward_filter", x, gy);
  ENCORE_CHECK(x.dim() == 3 && gy.dim() == 3 && x.shape()[0] == gy.shape()[0] &&
                   conv_out_length(x.shape()[1], a.kernel, a) == gy.shape()[1],
               ShapeError, "[conv1d_backward_filter] input ", x.shape().str(), " and gradient ",
               gy.shape().str(), " do not match kernel size ", a.kernel);
  out[0] = defs::meta({a.kernel, x.shape()[2], gy.shape()[2]}, x.dtype(), x.device());
  return 1;
}

}  // namespace

void define_linalg_ops() {
  OpDef& mm = defs::define(OpId::matmul);
  mm.min_inputs = mm.max_inputs = 2;
  mm.infer = infer_matmul;
  mm.backward = bw_matmul;
  mm.save_inputs = true;

  OpDef& conv = defs::define(OpId::conv1d);
  conv.contiguous_inputs = true;
  conv.min_inputs = conv.max_inputs = 2;
  conv.infer = infer_conv1d;
  conv.backward = bw_conv1d;
  conv.save_inputs = true;

  OpDef& bd = defs::define(OpId::conv1d_backward_data);
  bd.contiguous_inputs = true;
  bd.min_inputs = bd.max_inputs = 2;
  bd.infer = infer_conv1d_backward_data;
  OpDef& bf = defs::define(OpId::conv1d_backward_filter);
  bf.contiguous_inputs = true;
  bf.min_inputs = bf.max_inputs = 2;
  bf.infer = infer_conv1d_backward_filter;
}

}  // namespace encore
