// Tensor: what programs hold. The handle, its geometry and its gradient slot are core's
// (TensorBase, core/tensor.h); the methods declared here run ops, and are defined with them in
// ops/ (views and copies in ops/defs/data.cpp, values in ops/tensor_methods.cpp). backward()
// runs the autograd engine through the hook autograd installs (ops/dispatch.h), so each layer
// defines what it declares.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace encore {

class Tensor : public TensorBase {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : TensorBase(std::move(impl)) {}
  Tensor(TensorBase base) : TensorBase(std::move(base)) {}  // NOLINT: what core's functions return

  /// Uninitialized contiguous tensor.
  static Tensor empty(const Shape& shape, DType dtype = DType::Float32,
                      Device device = Device::cpu()) {
    return TensorBase::empty(shape, dtype, device);
  }
  /// A view with the given geometry on `storage` (no copy).
  static Tensor make_view(std::shared_ptr<Storage> storage, const Shape& shape,
                          const Strides& strides, int64_t offset, DType dtype) {
    return TensorBase::make_view(std::move(storage), shape, strides, offset, dtype);
  }

  // Values (copied to the host). Inside a trace these throw: the data does not exist yet.
  double item() const;
  template <class T> std::vector<T> to_vector() const;
  std::string str() const;

  // Views: no copy, share storage.
  Tensor reshape(const Shape& shape) const;  // one dimension may be -1; copies if not viewable
  Tensor transpose(int64_t axis0, int64_t axis1) const;
  Tensor permute(const std::vector<int64_t>& order) const;
  Tensor slice(int64_t axis, int64_t start, int64_t stop, int64_t step = 1) const;
  Tensor expand(const Shape& shape) const;
  Tensor squeeze(int64_t axis) const;
  Tensor unsqueeze(int64_t axis) const;
  Tensor flatten(int64_t start_axis = 0) const;

  // Copies.
  Tensor contiguous() const;
  Tensor clone() const;
  Tensor to(Device device) const;
  Tensor to(DType dtype) const;

  // In place (not differentiable; bump the storage version).
  Tensor& copy_(const Tensor& src);
  /// An integer tensor takes a finite value within its range, truncated toward zero.
  Tensor& fill_(Scalar value);
  Tensor& add_(const Tensor& other);  // `other` broadcasts to this tensor's shape
  Tensor& add_(Scalar value);
  Tensor& zero_() { return fill_(0); }

  // Autograd.
  Tensor& set_requires_grad(bool on = true) {
    TensorBase::set_requires_grad(on);
    return *this;
  }
  /// The accumulated gradient (undefined: None); see TensorBase::grad.
  Tensor grad() const { return TensorBase::grad(); }
  /// Reverse-mode differentiation from this tensor; `grad` defaults to 1 for a scalar.
  void backward(const Tensor& grad = {}) const;
  /// A tensor sharing storage but cut from the autograd graph.
  Tensor detach() const { return TensorBase::detach(); }
};

}  // namespace encore
