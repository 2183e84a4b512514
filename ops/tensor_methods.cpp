// The Tensor methods (ops/tensor.h) that read values (item, to_vector, printing) and backward(),
// which hands over to autograd through its hook. The view, copy and in-place methods are defined
// with their ops in ops/defs/data.cpp.
#include <cmath>
#include <cstdio>
#include <numeric>

#include "core/modes.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

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
  ENCORE_CHECK(
      !tracing(), ValueError, "[print] cannot print ", describe(*this),
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
    case DType::Float32:
      format_rec(s, static_cast<const float*>(p), shape(), host.strides(), 0, 7, summarize);
      break;
    case DType::Float64:
      format_rec(s, static_cast<const double*>(p), shape(), host.strides(), 0, 7, summarize);
      break;
    case DType::Int32:
      format_rec(s, static_cast<const int32_t*>(p), shape(), host.strides(), 0, 7, summarize);
      break;
    case DType::Int64:
      format_rec(s, static_cast<const int64_t*>(p), shape(), host.strides(), 0, 7, summarize);
      break;
  }
  return s + suffix + ")";
}

namespace {
BackwardHook g_backward_hook = nullptr;
}  // namespace

void set_backward_hook(BackwardHook hook) { g_backward_hook = hook; }

void Tensor::backward(const Tensor& grad) const {
  ENCORE_CHECK(requires_grad(), ValueError, "[backward] ", describe(*this),
               " does not require grad: no op that produced it involved a tensor requiring grad");
  Tensor g = grad;
  if (!g.defined()) {
    ENCORE_CHECK(numel() == 1, ShapeError, "[backward] implicit gradient needs a scalar, got ",
                 describe(*this), "; pass a gradient tensor");
    g = full(shape(), 1, dtype(), device());
  }
  ENCORE_CHECK(g.shape() == shape(), ShapeError, "[backward] gradient ", describe(g),
               " does not match ", describe(*this));
  ENCORE_CHECK(g.dtype() == dtype(), DTypeError, "[backward] gradient ", describe(g),
               " does not match the dtype of ", describe(*this), "; convert it with .to(",
               ::encore::name(dtype()), ")");
  ENCORE_CHECK(g.device() == device(), DeviceError, "[backward] gradient ", describe(g),
               " is not on the device of ", describe(*this));
  ENCORE_CHECK(g_backward_hook, Error, "[backward] autograd is not part of this program");
  g_backward_hook(*this, g);
}

}  // namespace encore
