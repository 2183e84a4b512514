// TensorBase: a shared handle to a strided view of a Storage. Copying one copies the handle,
// never the data. This is the part of a tensor core defines: geometry, storage, the gradient
// slot and the autograd flags. The Tensor that programs use (ops/tensor.h) adds the methods that
// run ops (views, copies, values, backward); math lives in ops/ops.h as free functions.
#pragma once

#include "core/cxx20.h"

#include <array>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/scalar.h"
#include "core/shape.h"
#include "core/storage.h"

namespace encore {

namespace autograd {
struct Node;
}
struct TensorImpl;

/// How many layers above core may keep state of their own on a tensor (TensorExtension).
constexpr int kTensorExtensions = 2;

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Strides strides;     // in elements
  int64_t offset = 0;  // in elements
  DType dtype = DType::Float32;
  Device device;
  bool requires_grad = false;
  std::shared_ptr<TensorImpl> grad;
  std::shared_ptr<autograd::Node> grad_fn;  // the op that produced this tensor, if tracked
  uint32_t output_nr = 0;                   // which output of grad_fn this tensor is
  bool view = false;  // made by a view op (slice, reshape, transpose): shares another's memory
  std::string name;   // set for parameters ("dense_1.kernel"); used in explanations
  /// What higher layers keep per tensor, each in the slot it claimed (TensorExtension): the
  /// graph layer's gradient buffer for traced steps, the logits behind sigmoid's probabilities.
  /// Core only holds them.
  std::array<std::shared_ptr<void>, kTensorExtensions> extensions;
};

/// Claims a slot of TensorImpl::extensions for `owner` (at static initialization; an Error
/// when none is left).
int claim_tensor_extension(const char* owner);

/// Typed access to one slot of TensorImpl::extensions, claimed when constructed: a layer above
/// core keeps its per-tensor state there (graph/tracer.h, ops/ops.h).
template <class T> class TensorExtension {
 public:
  explicit TensorExtension(const char* owner) : slot_(claim_tensor_extension(owner)) {}
  T* get(const TensorImpl& t) const { return static_cast<T*>(t.extensions[slot_].get()); }
  std::shared_ptr<T> shared(const TensorImpl& t) const {
    return std::static_pointer_cast<T>(t.extensions[slot_]);
  }
  void set(TensorImpl& t, std::shared_ptr<T> value) const {
    t.extensions[slot_] = std::move(value);
  }

 private:
  int slot_;
};

class TensorBase {
 public:
  TensorBase() = default;
  explicit TensorBase(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  /// Uninitialized contiguous tensor.
  static TensorBase empty(const Shape& shape, DType dtype = DType::Float32,
                          Device device = Device::cpu());
  /// A view with the given geometry on `storage` (no copy).
  static TensorBase make_view(std::shared_ptr<Storage> storage, const Shape& shape,
                              const Strides& strides, int64_t offset, DType dtype);

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same(const TensorBase& o) const { return impl_ == o.impl_; }

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
                 ::encore::name(dtype()), ", requested ", ::encore::name(dtype_of<T>::value));
    return static_cast<T*>(data_ptr());
  }

  /// Makes this tensor view `other`'s storage, geometry and dtype (shapes must match). Traces
  /// that captured the old storage notice on their next call and retrace.
  void set_data(const TensorBase& other);

  // Autograd.
  bool requires_grad() const { return impl_->requires_grad; }
  void set_requires_grad(bool on = true);
  bool is_leaf() const { return impl_->grad_fn == nullptr; }
  /// The accumulated gradient (undefined: None). Reads and writes go through the thread's
  /// GradObserver, if any, so a trace knows which gradient slots its graph depends on.
  TensorBase grad() const;
  void set_grad(const TensorBase& g);
  /// A tensor sharing storage but cut from the autograd graph.
  TensorBase detach() const;

  const std::string& name() const { return impl_->name; }
  void set_name(std::string n) { impl_->name = std::move(n); }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

/// "(32, 140, 30) float32 on cpu"
std::string describe(const TensorBase& t);
/// Throws ValueError naming `op` when `t`'s values cannot be read: inside a trace (they do not
/// exist yet), or for a tensor made inside a trace.
void check_readable(const TensorBase& t, const char* op);

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
