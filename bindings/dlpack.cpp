// DLPack, both ways, zero-copy. The ABI structs are written here from the DLPack
// specification (v1.0 with the legacy v0.8 form). Protocol:
//  - export: Tensor.__dlpack__ returns a PyCapsule named "dltensor" (legacy) or
//    "dltensor_versioned" (when the consumer asks for max_version >= 1.0) whose manager_ctx
//    holds the tensor's Storage and geometry; the consumer renames the capsule "used_..." and calls
//    the deleter when done. A capsule that was never consumed calls the deleter when it is
//    collected.
//  - import: encore.from_dlpack(obj) calls obj.__dlpack__ (asking for a versioned capsule
//    first), renames the capsule and wraps the memory in a Storage whose owner calls the
//    producer's deleter when the last tensor viewing it is gone.
#include "bindings.h"

#include "core/backend.h"

namespace encore::python {

namespace {

// ---- the DLPack ABI ---------------------------------------------------------------------
extern "C" {
struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
};
enum DLDeviceType : int32_t { kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3 };
struct DLDevice {
  int32_t device_type;
  int32_t device_id;
};
enum DLDataTypeCode : uint8_t { kDLInt = 0, kDLUInt = 1, kDLFloat = 2 };
struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; NULL means compact row-major
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
};
}
constexpr uint64_t kDLFlagReadOnly = 1u << 0;
constexpr uint64_t kDLFlagIsCopied = 1u << 1;
constexpr const char* kLegacyName = "dltensor";
constexpr const char* kLegacyUsed = "used_dltensor";
constexpr const char* kVersionedName = "dltensor_versioned";
constexpr const char* kVersionedUsed = "used_dltensor_versioned";

// ---- export -----------------------------------------------------------------------------

// What a consumer's view needs alive: the storage, not the tensor (set_data may give the
// tensor other storage while the consumer still reads this one), and the geometry it points to.
// On CUDA also the consumer's stream (DLPack's numbering; 0: none to wait for): its kernels
// reading the memory may still be queued there when it calls the deleter.
struct ExportCtx {
  std::shared_ptr<Storage> storage;
  std::vector<int64_t> shape, strides;
  Device device;
  uintptr_t consumer_stream = 0;
};

DLTensor describe_for_export(const Tensor& t, ExportCtx& ctx) {
  ctx.storage = t.storage();
  ctx.device = t.device();
  ctx.shape = t.shape().vec();
  ctx.strides = t.strides().vec();
  DLTensor dl{};
  dl.data = t.numel() ? t.data_ptr() : nullptr;
  dl.device = {t.device().is_cpu() ? kDLCPU : kDLCUDA, t.device().is_cpu() ? 0 : t.device().index};
  dl.ndim = t.dim();
  dl.dtype = {static_cast<uint8_t>(is_floating(t.dtype()) ? kDLFloat : kDLInt),
              static_cast<uint8_t>(itemsize(t.dtype()) * 8), 1};
  dl.shape = ctx.shape.data();
  dl.strides = ctx.strides.data();
  dl.byte_offset = 0;
  return dl;
}

// The consumer's deleter, called from any thread, with or without the GIL. Encore frees CUDA
// memory stream-ordered on its compute stream, where the next allocation may reuse it at once:
// that stream first waits for what the consumer queued on its own stream until now.
template <class Managed> void delete_export(Managed* self) {
  auto* ctx = static_cast<ExportCtx*>(self->manager_ctx);
  if (ctx->consumer_stream != 0)
    if (Backend* b = loaded_backend(ctx->device.type))
      b->wait_for_stream(ctx->device.index, ctx->consumer_stream);
  delete ctx;
  delete self;
}

// Destructor of a capsule that nobody consumed (still carrying its original name): no consumer
// queued anything.
template <class Managed> void unconsumed_capsule(PyObject* capsule, const char* name) {
  if (!PyCapsule_IsValid(capsule, name)) return;
  auto* m = static_cast<Managed*>(PyCapsule_GetPointer(capsule, name));
  if (!m || !m->deleter) return;
  static_cast<ExportCtx*>(m->manager_ctx)->consumer_stream = 0;
  m->deleter(m);
}

// DLPack's stream argument as ExportCtx keeps it: None means the legacy default stream (1); -1
// asks the producer for no synchronization (0 here: nothing to wait for).
uintptr_t consumer_stream(const py::object& stream) {
  if (stream.is_none()) return 1;
  const int64_t s = stream.cast<int64_t>();
  if (s == -1) return 0;
  return s == 0 ? 1 : static_cast<uintptr_t>(s);
}

py::object export_capsule(const Tensor& t, bool versioned, bool copied, uintptr_t stream) {
  auto ctx = std::make_unique<ExportCtx>();
  const DLTensor dl = describe_for_export(t, *ctx);
  if (t.device().is_cuda()) ctx->consumer_stream = stream;
  if (versioned) {
    auto* m = new DLManagedTensorVersioned{{1, 0},
                                           ctx.release(),
                                           &delete_export<DLManagedTensorVersioned>,
                                           copied ? kDLFlagIsCopied : 0,
                                           dl};
    PyObject* cap = PyCapsule_New(m, kVersionedName, [](PyObject* c) {
      unconsumed_capsule<DLManagedTensorVersioned>(c, kVersionedName);
    });
    if (!cap) {
      delete_export(m);
      throw py::error_already_set();
    }
    return py::reinterpret_steal<py::object>(cap);
  }
  auto* m = new DLManagedTensor{dl, ctx.release(), &delete_export<DLManagedTensor>};
  PyObject* cap = PyCapsule_New(
      m, kLegacyName, [](PyObject* c) { unconsumed_capsule<DLManagedTensor>(c, kLegacyName); });
  if (!cap) {
    delete_export(m);
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::object>(cap);
}

py::tuple dlpack_device(Device d) {
  return py::make_tuple(static_cast<int>(d.is_cpu() ? kDLCPU : kDLCUDA), static_cast<int>(d.index));
}

py::object dunder_dlpack(const Tensor& t, py::object stream, py::object max_version,
                         py::object dl_device, py::object copy) {
  check_readable(t, "__dlpack__");
  if (!dl_device.is_none() && !dl_device.equal(dlpack_device(t.device())))
    throw py::buffer_error("[__dlpack__] the tensor is on " + t.device().str() +
                           "; exporting to another device is not supported");
  const bool want_copy = !copy.is_none() && copy.cast<bool>();
  if (!stream.is_none() && !py::isinstance<py::int_>(stream))
    throw py::type_error(
        "[__dlpack__] stream must be None or an int (a CUDA stream as DLPack numbers them)");
  const uintptr_t consumer = consumer_stream(stream);
  Tensor out = want_copy ? t.clone() : t;
  // The consumer reads on its own stream: make encore's queued work finish first.
  if (out.device().is_cuda() && consumer != 0) {
    py::gil_scoped_release release;
    synchronize(out.device());
  }
  bool versioned = false;
  if (!max_version.is_none())
    versioned = py::len(max_version) >= 1 && max_version[py::int_(0)].cast<int>() >= 1;
  return export_capsule(out, versioned, want_copy, consumer);
}

// ---- import -----------------------------------------------------------------------------

DType dtype_of(const DLDataType& t) {
  if (t.lanes == 1) {
    if (t.code == kDLFloat && t.bits == 32) return DType::Float32;
    if (t.code == kDLFloat && t.bits == 64) return DType::Float64;
    if (t.code == kDLInt && t.bits == 32) return DType::Int32;
    if (t.code == kDLInt && t.bits == 64) return DType::Int64;
  }
  throw DTypeError(detail::cat("[from_dlpack] unsupported DLPack dtype (code ", int(t.code),
                               ", bits ", int(t.bits), ", lanes ", t.lanes,
                               "): encore tensors are float32, float64, int32 or int64"));
}

Device device_of(const DLDevice& d) {
  if (d.device_type == kDLCPU || d.device_type == kDLCUDAHost) return Device::cpu();
  if (d.device_type == kDLCUDA) return Device::cuda(d.device_id);
  throw DeviceError(detail::cat("[from_dlpack] unsupported DLPack device type ", d.device_type,
                                " (encore reads CPU and CUDA memory)"));
}

// Calls the producer's deleter once; it may run Python code (NumPy's does), so it runs
// holding the GIL, and not at all once the interpreter is shutting down. The producer may reuse
// the memory as soon as its deleter returns, so for CUDA memory the work encore queued on it
// (kernels reading or writing it, a copy still running) is waited for first.
template <class Managed> std::shared_ptr<void> producer_owner(Managed* m) {
  const DLDevice where = m->dl_tensor.device;
  return std::shared_ptr<void>(m, [where](void* p) {
    auto* managed = static_cast<Managed*>(p);
    if (!managed->deleter) return;
    if (!python_alive()) return;
    if (where.device_type == kDLCUDA)
      if (Backend* b = loaded_backend(DeviceType::CUDA)) b->drain(where.device_id);
    const PyGILState_STATE state = PyGILState_Ensure();
    managed->deleter(managed);
    PyGILState_Release(state);
  });
}

Tensor view_of(const DLTensor& dl, std::shared_ptr<void> owner, bool read_only) {
  const DType dtype = dtype_of(dl.dtype);
  const Device device = device_of(dl.device);
  ENCORE_CHECK(dl.ndim >= 0 && dl.ndim <= kMaxDims, ShapeError, "[from_dlpack] rank ", dl.ndim,
               " exceeds the maximum of ", kMaxDims);
  Shape shape(std::vector<int64_t>(dl.shape, dl.shape + dl.ndim));
  Strides strides = dl.strides ? Strides(std::vector<int64_t>(dl.strides, dl.strides + dl.ndim))
                               : contiguous_strides(shape);
  int64_t extent = checked_numel(shape, "from_dlpack") ? 1 : 0;
  for (int i = 0; i < dl.ndim; ++i) {
    ENCORE_CHECK(shape[i] <= 1 || strides[i] >= 0, ValueError,
                 "[from_dlpack] negative strides are not supported (shape ", shape.str(), ")");
    if (shape[i] > 0) extent += (shape[i] - 1) * strides[i];
  }
  char* data = static_cast<char*>(dl.data) + dl.byte_offset;
  auto storage =
      Storage::wrap(data, static_cast<size_t>(extent) * itemsize(dtype), device, std::move(owner));
  Tensor t = Tensor::make_view(std::move(storage), shape, strides, 0, dtype);
  // Read-only producer memory is never written through encore: take a copy.
  if (read_only) {
    py::gil_scoped_release release;
    t = t.clone();
  }
  return t;
}

Tensor from_capsule(py::handle capsule) {
  PyObject* c = capsule.ptr();
  if (PyCapsule_IsValid(c, kVersionedName)) {
    auto* m = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(c, kVersionedName));
    if (m->version.major > 1)
      throw py::buffer_error("[from_dlpack] DLPack version " + std::to_string(m->version.major) +
                             " is newer than this build understands (1)");
    if (PyCapsule_SetName(c, kVersionedUsed) != 0) throw py::error_already_set();
    auto owner = producer_owner(m);  // from here on the deleter runs whatever happens
    return view_of(m->dl_tensor, std::move(owner), m->flags & kDLFlagReadOnly);
  }
  if (PyCapsule_IsValid(c, kLegacyName)) {
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(c, kLegacyName));
    if (PyCapsule_SetName(c, kLegacyUsed) != 0) throw py::error_already_set();
    auto owner = producer_owner(m);
    return view_of(m->dl_tensor, std::move(owner), false);
  }
  throw py::type_error(
      "[from_dlpack] expected a DLPack capsule ('dltensor' or 'dltensor_versioned'), "
      "possibly already consumed");
}

py::object from_dlpack(py::object obj) {
  if (py::isinstance<Tensor>(obj)) return obj;
  if (PyCapsule_CheckExact(obj.ptr())) return py::cast(from_capsule(obj));
  if (!py::hasattr(obj, "__dlpack__"))
    throw py::type_error(
        "[from_dlpack] expected an object with __dlpack__ (a NumPy array, a torch tensor, ...), "
        "got " +
        std::string(py::str(py::type::handle_of(obj).attr("__name__"))));
  py::dict kwargs;
  if (py::hasattr(obj, "__dlpack_device__")) {
    py::tuple dev = obj.attr("__dlpack_device__")();
    if (dev[0].cast<int>() == kDLCUDA) {
      // The producer orders its pending work before encore's compute stream.
      const Device device = Device::cuda(dev[1].cast<int>());
      kwargs["stream"] = py::int_(
          reinterpret_cast<uintptr_t>(require_backend(device, "from_dlpack").stream(device.index)));
    }
  }
  py::object capsule;
  py::dict versioned = py::reinterpret_steal<py::dict>(PyDict_Copy(kwargs.ptr()));
  versioned["max_version"] = py::make_tuple(1, 0);
  try {
    capsule = obj.attr("__dlpack__")(**versioned);
  } catch (py::error_already_set& e) {
    if (!e.matches(PyExc_TypeError)) throw;
    capsule = obj.attr("__dlpack__")(**kwargs);  // a producer from before DLPack 1.0
  }
  return py::cast(from_capsule(capsule));
}

}  // namespace

bool is_dlpack_producer(py::handle v) {
  return !py::isinstance<Tensor>(v) && !py::isinstance<py::array>(v) &&
         py::hasattr(v, "__dlpack__") && py::hasattr(v, "__dlpack_device__");
}

Tensor tensor_from_dlpack(py::handle v) {
  return from_dlpack(py::reinterpret_borrow<py::object>(v)).cast<Tensor>();
}

void init_dlpack(py::module_& m, py::class_<Tensor>& cls) {
  cls.def("__dlpack__", &dunder_dlpack, py::kw_only(), py::arg("stream") = py::none(),
          py::arg("max_version") = py::none(), py::arg("dl_device") = py::none(),
          py::arg("copy") = py::none(),
          "Exports the tensor as a DLPack capsule (zero-copy unless copy=True).")
      .def("__dlpack_device__", [](const Tensor& t) { return dlpack_device(t.device()); });
  m.def("from_dlpack", &from_dlpack, py::arg("obj"),
        "A tensor viewing the memory of any object that implements __dlpack__ (or of a DLPack "
        "capsule), "
        "zero-copy; it keeps the producer's buffer alive until the last view is gone.");
}

}  // namespace encore::python
