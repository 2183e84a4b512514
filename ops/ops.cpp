// The public op API (ops/ops.h): argument normalization, then one dispatcher call each.
#include "ops/ops.h"

#include <cmath>
#include <cstring>

#include "ops/dispatch.h"
#include "ops/matrix_layout.h"
#include "ops/random.h"

namespace encore {

// ---- creation --------------------------------------------------------------------------

Tensor full(const Shape& shape, Scalar value, DType dtype, Device device) {
  return call(OpId::full, {}, FullAttrs{shape, dtype, device, value, 0});
}
Tensor zeros(const Shape& shape, DType dtype, Device device) { return full(shape, 0, dtype, device); }
Tensor ones(const Shape& shape, DType dtype, Device device) { return full(shape, 1, dtype, device); }
Tensor full_like(const Tensor& t, Scalar value) { return full(t.shape(), value, t.dtype(), t.device()); }
Tensor zeros_like(const Tensor& t) { return full_like(t, 0); }
Tensor ones_like(const Tensor& t) { return full_like(t, 1); }

Tensor arange(Scalar start, Scalar stop, Scalar step, DType dtype, Device device) {
  ENCORE_CHECK(step.d != 0.0 && std::isfinite(start.d) && std::isfinite(stop.d) && std::isfinite(step.d),
               ValueError, "[arange] needs finite bounds and a non-zero step");
  double n;
  if (start.integral && stop.integral && step.integral) {
    // ceil((stop - start) / step), exactly: stop - start may need 65 bits.
    const __int128 span = static_cast<__int128>(stop.i) - start.i;
    const __int128 count = span / step.i + (span % step.i != 0 && (span > 0) == (step.i > 0));
    n = static_cast<double>(std::max<__int128>(count, 0));
  } else {
    n = std::max(0.0, std::ceil((stop.d - start.d) / step.d));
  }
  ENCORE_CHECK(n <= static_cast<double>(kMaxNumel), ShapeError, "[arange] ", n,
               " elements are too many (at most 2^60 - 1)");
  const int64_t count = static_cast<int64_t>(n);
  // The last value must fit the dtype too (the first is checked with the attributes).
  if (count > 0 && !is_floating(dtype)) {
    const Scalar last = start.integral && step.integral
                            ? Scalar(static_cast<int64_t>(start.i + static_cast<__int128>(step.i) * (count - 1)))
                            : Scalar(start.d + step.d * static_cast<double>(count - 1));
    last.check(dtype, "arange");
  }
  return call(OpId::arange, {}, FullAttrs{{count}, dtype, device, start, step});
}

template <class T> Tensor from_vector(const std::vector<T>& data, const Shape& shape, Device device) {
  ENCORE_CHECK(static_cast<int64_t>(data.size()) == checked_numel(shape, "from_vector"), ShapeError, "[from_vector] ",
               data.size(), " values cannot fill shape ", shape.str());
  Tensor t = Tensor::empty(shape, dtype_of<T>::value, Device::cpu());
  if (!data.empty()) std::memcpy(t.data_ptr(), data.data(), data.size() * sizeof(T));
  return t.to(device);
}
template Tensor from_vector<float>(const std::vector<float>&, const Shape&, Device);
template Tensor from_vector<double>(const std::vector<double>&, const Shape&, Device);
template Tensor from_vector<int32_t>(const std::vector<int32_t>&, const Shape&, Device);
template Tensor from_vector<int64_t>(const std::vector<int64_t>&, const Shape&, Device);

Tensor tensor(std::initializer_list<double> values, const Shape& shape, DType dtype, Device device) {
  return from_vector(std::vector<double>(values), shape).to(dtype).to(device);
}

namespace {
Generator& generator(Generator* gen, Device device, const char* op) {
  Generator& g = gen ? *gen : Generator::default_for(device);
  ENCORE_CHECK(g.device() == device, DeviceError, "[", op, "] generator is on ", g.device().str(),
               " but the tensor is requested on ", device.str());
  return g;
}
}  // namespace

Tensor uniform(const Shape& shape, double low, double high, DType dtype, Device device, Generator* gen) {
  return call(OpId::uniform, {generator(gen, device, "uniform").state()},
              FullAttrs{shape, dtype, device, low, high});
}

Tensor normal(const Shape& shape, double mean, double std, DType dtype, Device device, Generator* gen) {
  return call(OpId::normal, {generator(gen, device, "normal").state()},
              FullAttrs{shape, dtype, device, mean, std});
}

// ---- elementwise -----------------------------------------------------------------------

Tensor neg(const Tensor& x) { return call(OpId::neg, {x}); }
Tensor exp(const Tensor& x) { return call(OpId::exp, {x}); }
Tensor log(const Tensor& x) { return call(OpId::log, {x}); }
Tensor sqrt(const Tensor& x) { return call(OpId::sqrt, {x}); }
Tensor tanh(const Tensor& x) { return call(OpId::tanh, {x}); }
Tensor sigmoid(const Tensor& x) {
  Tensor p = call(OpId::sigmoid, {x});
  p.impl()->sigmoid_origin =
      SigmoidOrigin{x.impl_ptr(), x.storage(), x.storage()->version(), p.storage()->version()};
  return p;
}
Tensor relu(const Tensor& x) { return call(OpId::relu, {x}); }
Tensor abs(const Tensor& x) { return call(OpId::abs, {x}); }
Tensor softplus(const Tensor& x) { return call(OpId::softplus, {x}); }
Tensor leaky_relu(const Tensor& x, double alpha) { return call(OpId::leaky_relu, {x}, ScalarAttrs{alpha}); }
Tensor pow(const Tensor& x, double p) { return call(OpId::pow_scalar, {x}, ScalarAttrs{p}); }
Tensor clip(const Tensor& x, Scalar lo, Scalar hi) {
  ENCORE_CHECK(!(lo.integral && hi.integral ? lo.i > hi.i : lo.d > hi.d), ValueError,
               "[clip] lower bound ", lo.str(), " exceeds upper bound ", hi.str());
  return call(OpId::clip, {x}, ClipAttrs{lo, hi});
}

Tensor activation(const Tensor& x, Activation a) {
  switch (a) {
    case Activation::Tanh: return tanh(x);
    case Activation::Sigmoid: return sigmoid(x);
    case Activation::Relu: return relu(x);
    case Activation::HardSigmoid: return clip(x * 0.2 + 0.5, 0.0, 1.0);
    case Activation::Linear: break;
  }
  return x;
}

Tensor add(const Tensor& a, const Tensor& b) { return call(OpId::add, {a, b}); }
Tensor sub(const Tensor& a, const Tensor& b) { return call(OpId::sub, {a, b}); }
Tensor mul(const Tensor& a, const Tensor& b) { return call(OpId::mul, {a, b}); }
Tensor div(const Tensor& a, const Tensor& b) { return call(OpId::div, {a, b}); }
Tensor maximum(const Tensor& a, const Tensor& b) { return call(OpId::maximum, {a, b}); }
Tensor minimum(const Tensor& a, const Tensor& b) { return call(OpId::minimum, {a, b}); }
Tensor add(const Tensor& a, Scalar b) { return call(OpId::add_scalar, {a}, ScalarAttrs{b}); }
Tensor mul(const Tensor& a, Scalar b) { return call(OpId::mul_scalar, {a}, ScalarAttrs{b}); }

Tensor eq(const Tensor& a, const Tensor& b) { return call(OpId::eq, {a, b}); }
Tensor ne(const Tensor& a, const Tensor& b) { return call(OpId::ne, {a, b}); }
Tensor gt(const Tensor& a, const Tensor& b) { return call(OpId::gt, {a, b}); }
Tensor ge(const Tensor& a, const Tensor& b) { return call(OpId::ge, {a, b}); }
Tensor lt(const Tensor& a, const Tensor& b) { return call(OpId::lt, {a, b}); }
Tensor le(const Tensor& a, const Tensor& b) { return call(OpId::le, {a, b}); }
Tensor gt(const Tensor& a, Scalar b) { return gt(a, full({}, b, a.dtype(), a.device())); }
Tensor lt(const Tensor& a, Scalar b) { return lt(a, full({}, b, a.dtype(), a.device())); }

Tensor operator-(const Tensor& x) { return neg(x); }
Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, Scalar b) { return add(a, b); }
Tensor operator-(const Tensor& a, Scalar b) { return add(a, -b); }
Tensor operator*(const Tensor& a, Scalar b) { return mul(a, b); }
Tensor operator/(const Tensor& a, Scalar b) { return div(a, full({}, b, a.dtype(), a.device())); }
Tensor operator+(Scalar a, const Tensor& b) { return add(b, a); }
Tensor operator-(Scalar a, const Tensor& b) { return add(neg(b), a); }
Tensor operator*(Scalar a, const Tensor& b) { return mul(b, a); }
Tensor operator/(Scalar a, const Tensor& b) { return div(full({}, a, b.dtype(), b.device()), b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }

// ---- reductions ------------------------------------------------------------------------

namespace {
uint32_t axes_mask(const Tensor& x, const std::vector<int64_t>& axes, const char* op) {
  if (axes.empty()) return x.dim() == 0 ? 0u : (1u << x.dim()) - 1u;
  uint32_t mask = 0;
  for (int64_t a : axes) {
    const int ax = normalize_axis(a, x.dim(), op);
    ENCORE_CHECK(!(mask >> ax & 1u), ValueError, "[", op, "] axis ", a, " is listed twice");
    mask |= 1u << ax;
  }
  return mask;
}
}  // namespace

Tensor sum(const Tensor& x, const std::vector<int64_t>& axes, bool keepdim) {
  return call(OpId::sum, {x}, ReduceAttrs{axes_mask(x, axes, "sum"), keepdim});
}

Tensor mean(const Tensor& x, const std::vector<int64_t>& axes, bool keepdim) {
  const uint32_t mask = axes_mask(x, axes, "mean");
  int64_t count = 1;
  for (int i = 0; i < x.dim(); ++i)
    if (mask >> i & 1u) count *= x.shape()[i];
  ENCORE_CHECK(is_floating(x.dtype()), DTypeError, "[mean] needs a floating tensor, got ", describe(x));
  return mul(call(OpId::sum, {x}, ReduceAttrs{mask, keepdim}), 1.0 / static_cast<double>(count));
}

Tensor max(const Tensor& x, const std::vector<int64_t>& axes, bool keepdim) {
  return call(OpId::max, {x}, ReduceAttrs{axes_mask(x, axes, "max"), keepdim});
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  const int lead = x.dim() - shape.size();
  ENCORE_CHECK(lead >= 0, ShapeError, "[sum_to] cannot sum ", x.shape().str(), " to ", shape.str());
  std::vector<int64_t> axes;
  for (int i = 0; i < x.dim(); ++i) {
    if (i < lead) {
      axes.push_back(i);
      continue;
    }
    const int64_t want = shape[i - lead];
    ENCORE_CHECK(want == x.shape()[i] || want == 1, ShapeError, "[sum_to] cannot sum ",
                 x.shape().str(), " to ", shape.str());
    if (want == 1 && x.shape()[i] != 1) axes.push_back(i);
  }
  Tensor r = axes.empty() ? x : sum(x, axes, true);
  return r.reshape(shape);
}

// ---- data movement ---------------------------------------------------------------------

Tensor concat(const std::vector<Tensor>& xs, int64_t axis) {
  ENCORE_CHECK(!xs.empty(), ValueError, "[concat] needs at least one tensor");
  ENCORE_CHECK(xs[0].defined(), ValueError, "[concat] input 0 is an undefined tensor");
  const int ax = normalize_axis(axis, xs[0].dim(), "concat");
  return dispatch(OpId::concat, xs, AxisAttrs{ax})[0];
}

Tensor stack(const std::vector<Tensor>& xs, int64_t axis) {
  ENCORE_CHECK(!xs.empty() && xs[0].defined(), ValueError, "[stack] needs at least one tensor");
  const int ax = normalize_axis(axis, xs[0].dim() + 1, "stack");
  std::vector<Tensor> parts;
  parts.reserve(xs.size());
  for (const Tensor& x : xs) parts.push_back(x.unsqueeze(ax));
  return dispatch(OpId::concat, parts, AxisAttrs{ax})[0];
}

Tensor flip(const Tensor& x, int64_t axis) {
  return call(OpId::flip, {x}, AxisAttrs{normalize_axis(axis, x.dim(), "flip")});
}

// ---- linear algebra and convolution ----------------------------------------------------

namespace {
Tensor blas_ready(const Tensor& t) {
  return matrix_layout(t.shape(), t.strides()).ok ? t : t.contiguous();
}
}  // namespace

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  ENCORE_CHECK(a_in.defined() && b_in.defined(), ValueError, "[matmul] undefined operand");
  ENCORE_CHECK(a_in.dim() >= 1 && b_in.dim() >= 1, ShapeError, "[matmul] operands must have rank >= 1, got ",
               a_in.shape().str(), " and ", b_in.shape().str());
  Tensor a = a_in.dim() == 1 ? a_in.unsqueeze(0) : a_in;
  Tensor b = b_in.dim() == 1 ? b_in.unsqueeze(-1) : b_in;
  a = blas_ready(a);
  b = blas_ready(b);
  Tensor out;
  // (..., M, K) @ (K, N): one GEMM over all rows when the leading dims fold into M.
  if (b.dim() == 2 && a.dim() > 2) {
    const int64_t k = a.shape().back();
    const Shape rows{a.numel() / std::max<int64_t>(k, 1), k};
    Strides st;
    if (k > 0 && view_strides(a.shape(), a.strides(), rows, st) && matrix_layout(rows, st).ok) {
      Shape out_shape = a.shape();
      out_shape[out_shape.size() - 1] = b.shape()[1];
      out = call(OpId::matmul, {a.reshape(rows), b}).reshape(out_shape);
    }
  }
  if (!out.defined()) out = call(OpId::matmul, {a, b});
  if (a_in.dim() == 1) out = out.squeeze(-2);
  if (b_in.dim() == 1) out = out.squeeze(-1);
  return out;
}

Padding Padding::parse(const std::string& s) {
  if (s == "valid") return valid();
  if (s == "same") return same();
  throw ValueError("[conv1d] unknown padding '" + s + "' (expected 'valid' or 'same')");
}

namespace {
// The steps a kernel covers, (kernel - 1) * dilation + 1, for user-sized operands.
int64_t conv1d_span(int64_t kernel, int64_t dilation) {
  int64_t span;
  ENCORE_CHECK(!__builtin_mul_overflow(kernel - 1, dilation, &span) &&
                   !__builtin_add_overflow(span, 1, &span),
               ShapeError, "[conv1d] kernel size ", kernel, " with dilation ", dilation,
               " overflows int64");
  return span;
}
}  // namespace

std::pair<int64_t, int64_t> conv1d_padding(int64_t length, int64_t kernel, int64_t stride,
                                           int64_t dilation, Padding padding) {
  switch (padding.kind) {
    case Padding::Valid: return {0, 0};
    case Padding::Explicit: return {padding.left, padding.right};
    case Padding::Same: {
      // Keras/TensorFlow 'same': output length ceil(L / stride), extra padding on the right.
      // (out - 1) * stride < length, so only the span can overflow.
      const int64_t out = length / stride + (length % stride != 0);
      const int64_t span = conv1d_span(kernel, dilation);
      const int64_t total = std::max<int64_t>((out - 1) * stride - length + span, 0);
      return {total / 2, total - total / 2};
    }
  }
  return {0, 0};
}

int64_t conv1d_output_length(int64_t length, int64_t kernel, int64_t stride, int64_t dilation,
                             int64_t pad_l, int64_t pad_r) {
  const int64_t span = conv1d_span(kernel, dilation);
  int64_t padded;
  ENCORE_CHECK(!__builtin_add_overflow(length, pad_l, &padded) &&
                   !__builtin_add_overflow(padded, pad_r, &padded),
               ShapeError, "[conv1d] input length ", length, " with padding (", pad_l, ", ", pad_r,
               ") overflows int64");
  return padded < span ? 0 : (padded - span) / stride + 1;
}

Tensor conv1d(const Tensor& x, const Tensor& w, int64_t stride, Padding padding, int64_t dilation) {
  ENCORE_CHECK(x.defined() && w.defined(), ValueError, "[conv1d] undefined operand");
  ENCORE_CHECK(x.dim() == 3 && w.dim() == 3, ShapeError,
               "[conv1d] expects input (batch, steps, channels) and kernel (size, in, filters), got ",
               x.shape().str(), " and ", w.shape().str());
  ENCORE_CHECK(stride >= 1 && dilation >= 1, ValueError, "[conv1d] stride ", stride, " and dilation ",
               dilation, " must be >= 1");
  ENCORE_CHECK(w.shape()[0] >= 1, ValueError, "[conv1d] kernel size must be >= 1, got kernel ",
               w.shape().str());
  const auto [pl, pr] = conv1d_padding(x.shape()[1], w.shape()[0], stride, dilation, padding);
  return call(OpId::conv1d, {x, w}, ConvAttrs{stride, dilation, pl, pr, 0, 0});
}

// ---- neural-network building blocks ----------------------------------------------------

Tensor softmax(const Tensor& x, int64_t axis) {
  return call(OpId::softmax, {x}, AxisAttrs{normalize_axis(axis, x.dim(), "softmax")});
}

Tensor log_softmax(const Tensor& x, int64_t axis) {
  return call(OpId::log_softmax, {x}, AxisAttrs{normalize_axis(axis, x.dim(), "log_softmax")});
}

Tensor dropout(const Tensor& x, double p, bool training, Generator* gen) {
  ENCORE_CHECK(p >= 0.0 && p < 1.0, ValueError, "[dropout] rate must be in [0, 1), got ", p);
  if (!training || p == 0.0) return x;
  const Tensor in[] = {x, generator(gen, x.device(), "dropout").state()};
  return dispatch(OpId::dropout, in, DropoutAttrs{p})[0];
}

Tensor gather_last(const Tensor& x, const Tensor& index) { return call(OpId::gather_last, {x, index}); }

Tensor scatter_last(const Tensor& g, const Tensor& index, int64_t n) {
  ENCORE_CHECK(n >= 1, ValueError, "[scatter_last] axis size must be >= 1, got ", n);
  return call(OpId::scatter_last, {g, index}, ScatterAttrs{n});
}

std::pair<Tensor, Tensor> lstm_cell(const Tensor& z, const Tensor& c_prev, Activation activation,
                                    Activation recurrent_activation) {
  const Tensor in[] = {z, c_prev};
  const OutList r = dispatch(OpId::lstm_cell, in, LstmAttrs{activation, recurrent_activation});
  return {r[0], r[1]};
}

}  // namespace encore
