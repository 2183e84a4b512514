#include "core/tensor.h"

#include "core/modes.h"

namespace encore {

void check_readable(const TensorBase& t, const char* op) {
  ENCORE_CHECK(t.defined(), ValueError, "[", op, "] tensor is undefined");
  ENCORE_CHECK(!tracing(), ValueError, "[", op, "] cannot read the value of ", describe(t),
               " inside a traced function: values exist only when the graph replays. Return the "
               "tensor from the traced function and read it there");
  ENCORE_CHECK(!t.is_symbolic(), ValueError, "[", op, "] ", describe(t),
               " was created inside a trace and has no data outside it; return it from the "
               "traced function to get its value");
}

std::string describe(const TensorBase& t) {
  if (!t.defined()) return "undefined";
  return t.shape().str() + " " + std::string(name(t.dtype())) + " on " + t.device().str();
}

int claim_tensor_extension(const char* owner) {
  static int claimed = 0;  // static initialization runs on one thread
  ENCORE_CHECK(claimed < kTensorExtensions, Error, "[tensor] no extension slot left for ", owner,
               " (raise kTensorExtensions)");
  return claimed++;
}

TensorBase TensorBase::empty(const Shape& shape, DType dtype, Device device) {
  const int64_t numel = checked_numel(shape, "empty");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = Storage::allocate(static_cast<size_t>(numel) * itemsize(dtype), device);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  impl->device = device;
  return TensorBase(std::move(impl));
}

TensorBase TensorBase::make_view(std::shared_ptr<Storage> storage, const Shape& shape,
                                 const Strides& strides, int64_t offset, DType dtype) {
  auto impl = std::make_shared<TensorImpl>();
  impl->device = storage->device();
  impl->storage = std::move(storage);
  impl->shape = shape;
  impl->strides = strides;
  impl->offset = offset;
  impl->dtype = dtype;
  return TensorBase(std::move(impl));
}

int64_t TensorBase::size(int64_t axis) const {
  return shape()[normalize_axis(axis, dim(), "size")];
}

bool TensorBase::is_contiguous() const { return ::encore::is_contiguous(shape(), strides()); }

void* TensorBase::data_ptr() const {
  ENCORE_CHECK(defined(), ValueError, "[data] tensor is undefined");
  ENCORE_CHECK(!is_symbolic(), ValueError, "[data] ", describe(*this),
               " is symbolic (made inside a trace) and has no data");
  return static_cast<char*>(storage()->data()) + offset() * itemsize(dtype());
}

void TensorBase::set_data(const TensorBase& other) {
  ENCORE_CHECK(other.defined(), ValueError, "[set_data] source tensor is undefined");
  ENCORE_CHECK(!tracing(), ValueError,
               "[set_data] cannot replace a tensor's storage inside a traced function");
  ENCORE_CHECK(other.shape() == shape(), ShapeError, "[set_data] ", describe(other),
               " cannot replace ", describe(*this), ": shapes differ");
  ENCORE_CHECK(!requires_grad() || is_floating(other.dtype()), DTypeError, "[set_data] ",
               describe(*this), " requires grad and cannot take integer data");
  impl_->storage = other.storage();
  impl_->dtype = other.dtype();
  impl_->strides = other.strides();
  impl_->offset = other.offset();
  impl_->device = other.device();
}

namespace {
thread_local GradObserver* g_grad_observer = nullptr;
}  // namespace

GradObserver* grad_observer() { return g_grad_observer; }
void set_grad_observer(GradObserver* observer) { g_grad_observer = observer; }

TensorBase TensorBase::grad() const {
  if (g_grad_observer) g_grad_observer->on_grad_read(impl_);
  return TensorBase(impl_->grad);
}

void TensorBase::set_grad(const TensorBase& g) {
  if (g_grad_observer) g_grad_observer->on_grad_write(impl_);
  impl_->grad = g.impl_;
}

void TensorBase::set_requires_grad(bool on) {
  ENCORE_CHECK(is_leaf(), ValueError,
               "[requires_grad] can only be set on leaf tensors (not results of tracked ops)");
  ENCORE_CHECK(!on || is_floating(dtype()), DTypeError,
               "[requires_grad] only floating tensors can require gradients, got ",
               describe(*this));
  impl_->requires_grad = on;
}

TensorBase TensorBase::detach() const {
  return make_view(storage(), shape(), strides(), offset(), dtype());
}

}  // namespace encore
