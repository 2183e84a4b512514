// Tensor: a shared handle to a strided view of a Storage. Copying a Tensor copies the handle,
// never the data. Math lives in ops/ops.h as free functions; this class holds geometry,
// views, conversions, value access and the autograd hooks.
#pragma once

#include "core/cxx20.h"

#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/scalar.h"
#include "core/shape.h"
#include "core/storage.h"

namespace encore {

namespace autograd { struct Node; }
class Tensor;
struct TensorImpl;

/// Where a tensor of probabilities came from: set by `sigmoid` (ops/ops.h) so that
/// binary_crossentropy can compute from the logits (numerically stable, and a saturated output
/// keeps its gradient), as Keras does. Valid while neither storage changed since: the versions
/// and the logits' storage are recorded to tell.
struct SigmoidOrigin {
  std::shared_ptr<TensorImpl> logits;
  std::weak_ptr<const Storage> logits_storage;  // set_data may give the logits another one
  uint32_t logits_version = 0;
  uint32_t version = 0;  // of the probabilities' storage
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Strides strides;  // in elements
  int64_t offset = 0;  // in elements
  DType dtype = DType::Float32;
  Device device;
  bool requires_grad = false;
  std::shared_ptr<TensorImpl> grad;
  std::shared_ptr<autograd::Node> grad_fn;  // the op that produced this tensor, if tracked
  uint32_t output_nr = 0;                   // which output of grad_fn this tensor is
  bool view = false;  // made by a view op (slice, reshape, transpose): shares another's memory
  /// Owned by the graph layer: the persistent buffer that traced steps write this leaf's
  /// gradient into when its .grad was None, so every Plan writes the tensor users read.
  std::shared_ptr<TensorImpl> trace_grad;
  std::string name;  // set for parameters ("dense_1.kernel"); used in explanations
  std::optional<SigmoidOrigin> sigmoid_origin;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  /// Uninitialized contiguous tensor.
  static Tensor empty(const Shape& shape, DType dtype = DType::Float32, Device device = Device::cpu());
  /// A view with the given geometry on `storage` (no copy).
  static Tensor make_view(std::shared_ptr<Storage> storage, const Shape& shape,
                          const Strides& strides, int64_t offset, DType dtype);

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same(const Tensor& o) const { return impl_ == o.impl_; }

  const Shape& shape() const { return impl_->shape; }
  int dim() const { return impl_->shape.size(); }
  /// Size along `axis` (negative counts from the end).
  int64_t size(int64_t axis) const;
  int64_t numel() const { return impl_->shape.numel(); }
  const Strides& strides() const { return impl_->strides; }
  int64_t offset() const { return impl_->offset; }
  DType dtype() const { return impl_->dtype; }
  Device device() const { return impl_->device; }
  const std::shared_ptr<Storage>& storage() const { return impl_->storage; }
  bool is_contiguous() const;
  /// True for tensors made inside a trace: they have a shape but no data until replay.
  bool is_symbolic() const { return impl_->storage && impl_->storage->is_symbolic(); }
  size_t nbytes() const { return numel() * itemsize(dtype()); }

  /// Pointer to the first element; throws for symbolic tensors.
  void* data_ptr() const;
  template <class T> T* data() const {
    ENCORE_CHECK(dtype_of<T>::value == dtype(), DTypeError, "[data] tensor has dtype ",
                 ::encore::name(dtype()), ", requested ",
                 ::encore::name(dtype_of<T>::value));
    return static_cast<T*>(data_ptr());
  }

  // Values (copied to the host). Inside a trace these throw: the data does not exist yet.
  double item() const;
  template <class T> std::vector<T> to_vector() const;
  std::string str() const;

  // Views: no copy, share storage.
  Tensor reshape(const Shape& shape) const;  // one dimension may be -1; copies if not viewable
  Tensor transpose(int64_t a, int64_t b) const;
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
  /// Makes this tensor view `other`'s storage, geometry and dtype (shapes must match). Traces
  /// that captured the old storage notice on their next call and retrace.
  void set_data(const Tensor& other);

  // Autograd.
  bool requires_grad() const { return impl_->requires_grad; }
  Tensor& set_requires_grad(bool on = true);
  bool is_leaf() const { return impl_->grad_fn == nullptr; }
  /// The accumulated gradient (undefined: None). Reads and writes go through the thread's
  /// GradObserver, if any, so a trace knows which gradient slots its graph depends on.
  Tensor grad() const;
  void set_grad(const Tensor& g);
  /// Reverse-mode differentiation from this tensor; `grad` defaults to 1 for a scalar.
  void backward(const Tensor& grad = {}) const;
  /// A tensor sharing storage but cut from the autograd graph.
  Tensor detach() const;

  const std::string& name() const { return impl_->name; }
  void set_name(std::string n) { impl_->name = std::move(n); }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

/// "(32, 140, 30) float32 on cpu"
std::string describe(const Tensor& t);
/// Throws ValueError naming `op` when `t`'s values cannot be read: inside a trace (they do not
/// exist yet), or for a tensor made inside a trace.
void check_readable(const Tensor& t, const char* op);

/// Sees every read and write of a tensor's `.grad` slot on this thread. A tracer installs one
/// while it records: whether a gradient existed when the function ran decides whether the
/// graph overwrites or accumulates, so it becomes part of the traced function's cache key.
class GradObserver {
 public:
  virtual ~GradObserver() = default;
  virtual void on_grad_read(const std::shared_ptr<TensorImpl>& leaf) = 0;
  virtual void on_grad_write(const std::shared_ptr<TensorImpl>& leaf) = 0;
};
/// The observer of this thread (null when none).
GradObserver* grad_observer();
void set_grad_observer(GradObserver* observer);

}  // namespace encore
