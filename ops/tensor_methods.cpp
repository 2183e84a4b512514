// The Tensor methods that run ops — views, copies, conversions, reading values, printing —
// declared in core/tensor.h for convenience and defined here, in the layer that dispatches.
#include <cmath>
#include <cstdio>
#include <numeric>

#include "core/modes.h"
#include "ops/dispatch.h"

namespace encore {

namespace {

template <class T> void format_value(std::string& s, T v) {
  char buf[32];
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e16)
      std::snprintf(buf, sizeof buf, "%.0f.", static_cast<double>(v));
    else
      std::snprintf(buf, sizeof buf, "%.4g", static_cast<double>(v));
  } else {
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
  }
  s += buf;
}

template <class T>
void format_rec(std::string& s, const T* p, const Shape& shape, const Strides& st, int d,
                int indent, bool summarize) {
  if (d == shape.size()) {
    format_value(s, *p);
    return;
  }
  s += '[';
  const int64_t n = shape[d];
  const int64_t edge = 3;
  for (int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * edge && i == edge) {
      s += d + 1 == shape.size() ? "..., " : "...,\n" + std::string(indent + 1, ' ');
      i = n - edge;
    }
    format_rec(s, p + i * st[d], shape, st, d + 1, indent + 1, summarize);
    if (i + 1 < n) s += d + 1 == shape.size() ? ", " : ",\n" + std::string(indent + 1, ' ');
  }
  s += ']';
}

}  // namespace
double Tensor::item() const {
  check_readable(*this, "item");
  ENCORE_CHECK(numel() == 1, ValueError, "[item] needs a tensor with one element, got ",
               describe(*this));
  return to_vector<double>()[0];
}

template <class T> std::vector<T> Tensor::to_vector() const {
  check_readable(*this, "to_vector");
  Tensor host = to(Device::cpu()).to(dtype_of<T>::value).contiguous();
  const T* p = host.data<T>();
  return std::vector<T>(p, p + host.numel());
}
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int32_t> Tensor::to_vector<int32_t>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  std::string suffix = ", dtype=" + std::string(::encore::name(dtype()));
  if (device().is_cuda()) suffix += ", device=" + device().str();
  if (requires_grad()) suffix += ", requires_grad=True";
  // Printing inside a trace would show values the replays never see; a tensor that escaped a
  // trace has none, and says so.
  ENCORE_CHECK(!tracing(), ValueError, "[print] cannot print ", describe(*this),
               " inside a traced function: values exist only when the graph replays. Return the tensor "
               "from the traced function and print it there");
  if (is_symbolic()) return "tensor(<symbolic " + shape().str() + ">" + suffix + ")";
  Tensor host = to(Device::cpu());
  std::string s = "tensor(";
  // Summarize by what would be printed, empty rows included: (2**31, 0) has no elements but
  // 2**31 "[]". A checked shape's product of non-zero dims cannot overflow.
  int64_t printed = 1;
  for (int64_t d : shape()) printed *= std::max<int64_t>(d, 1);
  const bool summarize = printed > 1000;
  const void* p = host.data_ptr();
  switch (dtype()) {
    case DType::Float32: format_rec(s, static_cast<const float*>(p), shape(), host.strides(), 0, 7, summarize); break;
    case DType::Float64: format_rec(s, static_cast<const double*>(p), shape(), host.strides(), 0, 7, summarize); break;
    case DType::Int32: format_rec(s, static_cast<const int32_t*>(p), shape(), host.strides(), 0, 7, summarize); break;
    case DType::Int64: format_rec(s, static_cast<const int64_t*>(p), shape(), host.strides(), 0, 7, summarize); break;
  }
  return s + suffix + ")";
}

Tensor Tensor::reshape(const Shape& requested) const {
  Shape shape = requested;
  int infer = -1;
  for (int i = 0; i < shape.size(); ++i) {
    ENCORE_CHECK(shape[i] >= -1, ShapeError, "[reshape] invalid dimension in ", requested.str());
    if (shape[i] != -1) continue;
    ENCORE_CHECK(infer < 0, ShapeError, "[reshape] only one dimension may be -1 in ", requested.str());
    infer = i;
    shape[i] = 1;  // for the element count of the known dims
  }
  const int64_t known = checked_numel(shape, "reshape");
  if (infer >= 0) {
    ENCORE_CHECK(known > 0 && numel() % known == 0, ShapeError, "[reshape] cannot reshape ",
                 this->shape().str(), " into ", requested.str());
    shape[infer] = numel() / known;
  }
  ENCORE_CHECK(infer >= 0 || known == numel(), ShapeError, "[reshape] cannot reshape ", this->shape().str(),
               " (", numel(), " elements) into ", requested.str());
  Strides st;
  if (!view_strides(this->shape(), strides(), shape, st)) return contiguous().reshape(shape);
  return call(OpId::reshape, {*this}, ReshapeAttrs{shape});
}

Tensor Tensor::permute(const std::vector<int64_t>& order) const {
  ENCORE_CHECK(static_cast<int>(order.size()) == dim(), ShapeError, "[permute] order has ",
               order.size(), " axes but the tensor ", shape().str(), " has ", dim());
  Dims o;
  for (int64_t a : order) o.push_back(normalize_axis(a, dim(), "permute"));
  return call(OpId::permute, {*this}, PermuteAttrs{o});
}

Tensor Tensor::transpose(int64_t a, int64_t b) const {
  std::vector<int64_t> order(dim());
  std::iota(order.begin(), order.end(), 0);
  std::swap(order[normalize_axis(a, dim(), "transpose")], order[normalize_axis(b, dim(), "transpose")]);
  return permute(order);
}

Tensor Tensor::slice(int64_t axis, int64_t start, int64_t stop, int64_t step) const {
  const int ax = normalize_axis(axis, dim(), "slice");
  ENCORE_CHECK(step > 0, ValueError, "[slice] step must be positive, got ", step);
  const int64_t n = shape()[ax];
  auto clamp = [n](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + n : i, 0, n); };
  return call(OpId::slice, {*this}, SliceAttrs{ax, clamp(start), clamp(stop), step, shape()});
}

Tensor Tensor::expand(const Shape& shape) const {
  return call(OpId::expand, {*this}, ExpandAttrs{shape});
}

Tensor Tensor::squeeze(int64_t axis) const {
  const int ax = normalize_axis(axis, dim(), "squeeze");
  ENCORE_CHECK(shape()[ax] == 1, ShapeError, "[squeeze] axis ", axis, " of ", shape().str(),
               " has size ", shape()[ax], ", not 1");
  Shape s = shape();
  s.erase(ax);
  return reshape(s);
}

Tensor Tensor::unsqueeze(int64_t axis) const {
  const int ax = normalize_axis(axis, dim() + 1, "unsqueeze");
  Shape s = shape();
  s.insert(ax, 1);
  return reshape(s);
}

Tensor Tensor::flatten(int64_t start_axis) const {
  const int ax = normalize_axis(start_axis, std::max(dim(), 1), "flatten");
  Shape s;
  for (int i = 0; i < ax; ++i) s.push_back(shape()[i]);
  s.push_back(-1);
  return reshape(s);
}

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }
Tensor Tensor::clone() const { return call(OpId::copy, {*this}); }

Tensor Tensor::to(Device device) const {
  if (device == this->device()) return *this;
  return call(OpId::to_device, {*this}, DeviceAttrs{device});
}

Tensor Tensor::to(DType dtype) const {
  if (dtype == this->dtype()) return *this;
  return call(OpId::cast, {*this}, CastAttrs{dtype});
}

Tensor& Tensor::copy_(const Tensor& src) {
  Tensor s = src.to(device());
  if (s.dtype() != dtype()) s = s.to(dtype());
  const Tensor in[] = {*this, s};
  dispatch(OpId::copy_, in);
  return *this;
}

Tensor& Tensor::fill_(Scalar value) {
  const Tensor in[] = {*this};
  dispatch(OpId::fill_, in, ScalarAttrs{value});
  return *this;
}

}  // namespace encore
