// NumPy interop. Sharing rules (also in the package docs):
//  - encore.from_numpy(a) and the implicit conversion of arrays passed to encore functions
//    share `a`'s memory when it is C-contiguous, aligned, writeable, in native byte order and
//    float32/float64/int32/int64; the tensor's Storage holds a reference to `a` (Storage::wrap
//    `owner`), so the memory stays valid as long as either lives. Otherwise they copy.
//  - Tensor.numpy() of a contiguous CPU tensor returns an array viewing the tensor's memory;
//    the array's base is a capsule holding the tensor's Storage (not the tensor, whose storage
//    set_data may replace), which keeps the memory alive.
//    Other tensors (strided, on the GPU) are copied first.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "bindings.h"

namespace encore::python {

std::shared_ptr<void> keep_alive(py::object obj) {
  PyObject* p = obj.release().ptr();
  return std::shared_ptr<void>(p, [](void* q) {
    if (!python_alive()) return;  // leaked: nothing can run after shutdown
    const PyGILState_STATE state = PyGILState_Ensure();
    Py_DECREF(static_cast<PyObject*>(q));
    PyGILState_Release(state);
  });
}

DType dtype_of_numpy(const py::dtype& d, const char* op) {
  const char kind = d.kind();
  const char order = d.byteorder();
  const bool native = order == '=' || order == '|' ||
                      order == (std::endian::native == std::endian::little ? '<' : '>');
  if (native) {
    if (kind == 'f' && d.itemsize() == 4) return DType::Float32;
    if (kind == 'f' && d.itemsize() == 8) return DType::Float64;
    if (kind == 'i' && d.itemsize() == 4) return DType::Int32;
    if (kind == 'i' && d.itemsize() == 8) return DType::Int64;
  }
  throw DTypeError(
      detail::cat("[", op, "] unsupported NumPy dtype ", std::string(py::str(d)),
                  ": encore tensors are float32, float64, int32 or int64 (convert with .astype)"));
}

py::dtype numpy_dtype(DType t) {
  switch (t) {
    case DType::Float32:
      return py::dtype::of<float>();
    case DType::Float64:
      return py::dtype::of<double>();
    case DType::Int32:
      return py::dtype::of<int32_t>();
    case DType::Int64:
      break;
  }
  return py::dtype::of<int64_t>();
}

Tensor from_numpy(const py::array& a, bool copy) {
  const DType dtype = dtype_of_numpy(a.dtype(), "from_numpy");
  Shape shape(std::vector<int64_t>(a.shape(), a.shape() + a.ndim()));
  const bool shareable = (a.flags() & py::array::c_style) &&
                         (a.flags() & py::detail::npy_api::NPY_ARRAY_ALIGNED_) && a.writeable();
  if (copy || !shareable) {
    py::array c = py::array::ensure(a, py::array::c_style | py::array::forcecast);
    Tensor t = Tensor::empty(shape, dtype);
    if (t.nbytes()) std::memcpy(t.data_ptr(), c.data(), t.nbytes());
    return t;
  }
  auto storage = Storage::wrap(const_cast<void*>(a.data()), static_cast<size_t>(a.nbytes()),
                               Device::cpu(), keep_alive(a));
  return Tensor::make_view(std::move(storage), shape, contiguous_strides(shape), 0, dtype);
}

py::array to_numpy(const Tensor& t, bool copy) {
  check_readable(t, "numpy");
  Tensor host = t;
  if (!t.device().is_cpu() || !t.is_contiguous()) {
    py::gil_scoped_release release;
    host = t.to(Device::cpu()).contiguous();
  } else if (copy) {
    host = t.clone();
  }
  std::vector<py::ssize_t> shape(host.shape().begin(), host.shape().end()), strides;
  for (int64_t s : host.strides())
    strides.push_back(static_cast<py::ssize_t>(s * itemsize(host.dtype())));
  // The array keeps the storage alive, not the tensor: set_data (or Module.to) may give the
  // tensor other storage while the array still views this one.
  using StoragePtr = std::shared_ptr<Storage>;
  py::capsule base(new StoragePtr(host.storage()),
                   [](void* p) { delete static_cast<StoragePtr*>(p); });
  return py::array(numpy_dtype(host.dtype()), shape, strides, host.data_ptr(), base);
}

namespace {

// The dtype a NumPy array (or the array NumPy makes of Python data) becomes.
DType inferred_dtype(const py::dtype& d, bool from_python_values) {
  const char kind = d.kind();
  if (kind == 'b') return DType::Float32;
  if (kind == 'f') return from_python_values || d.itemsize() <= 4 ? DType::Float32 : DType::Float64;
  if (kind == 'i' || kind == 'u') {
    if (from_python_values) return DType::Int64;
    return d.itemsize() < 4 || (kind == 'i' && d.itemsize() == 4) ? DType::Int32 : DType::Int64;
  }
  throw DTypeError(detail::cat("[tensor] cannot make a tensor of NumPy dtype ",
                               std::string(py::str(d)),
                               ": encore tensors hold float32, float64, int32 or int64 numbers"));
}

// NumPy's astype wraps integers and turns NaN and out-of-range floats into whatever the CPU
// gives (2**40 became 0 in an int32 tensor, NaN INT_MIN, a uint64 above 2**63 a negative
// number): values the integer dtype cannot hold are an error, as fill_ and full make them.
void check_values_fit(const py::array& arr, DType target) {
  const char kind = arr.dtype().kind();
  if (is_floating(target) || arr.size() == 0 || kind == 'b') return;
  const int bits = target == DType::Int32 ? 32 : 64;
  const std::string into = detail::cat(" cannot be stored in an ", name(target), " tensor");
  py::object lo, hi;
  if (kind == 'f') {
    py::module_ np = py::module_::import("numpy");
    ENCORE_CHECK(np.attr("isfinite")(arr).attr("all")().cast<bool>(), ValueError,
                 "[tensor] NaN or infinity", into);
    const py::object whole = np.attr("trunc")(arr);
    lo = whole.attr("min")(), hi = whole.attr("max")();
    ENCORE_CHECK(lo.cast<double>() >= -std::ldexp(1.0, bits - 1) &&
                     hi.cast<double>() < std::ldexp(1.0, bits - 1),
                 ValueError, "[tensor] a value in ", std::string(py::str(lo)), " to ",
                 std::string(py::str(hi)), into, " (out of range)");
    return;
  }
  // Python ints compare exactly, whatever the array's integer type.
  lo = py::int_(arr.attr("min")()), hi = py::int_(arr.attr("max")());
  const py::int_ min_fit(bits == 32 ? int64_t{INT32_MIN} : INT64_MIN),
      max_fit(bits == 32 ? int64_t{INT32_MAX} : INT64_MAX);
  ENCORE_CHECK(lo.attr("__ge__")(min_fit).cast<bool>() && hi.attr("__le__")(max_fit).cast<bool>(),
               ValueError, "[tensor] a value in ", std::string(py::str(lo)), " to ",
               std::string(py::str(hi)), into, " (out of range)");
}

}  // namespace

Tensor tensor_from_data(py::handle data, py::handle dtype, py::handle device, bool requires_grad,
                        bool share) {
  Tensor t;
  if (py::isinstance<Tensor>(data)) {
    const Tensor& src = data.cast<const Tensor&>();
    t = share ? src.detach() : src.detach().clone();
    if (!dtype.is_none()) t = t.to(to_dtype(dtype));
  } else if (is_dlpack_producer(data)) {
    // A torch / CuPy / JAX tensor: its memory through DLPack (on its device), not through NumPy.
    const Tensor view = tensor_from_dlpack(data);
    t = share ? view : view.clone();
    if (!dtype.is_none()) t = t.to(to_dtype(dtype));
  } else {
    py::module_ np = py::module_::import("numpy");
    const bool is_array = py::isinstance<py::array>(data);
    const bool from_numpy_values = is_array || py::isinstance(data, np.attr("generic"));
    py::array arr = py::reinterpret_steal<py::array>(np.attr("asarray")(data).release());
    const DType target =
        dtype.is_none() ? inferred_dtype(arr.dtype(), !from_numpy_values) : to_dtype(dtype);
    if (!arr.dtype().is(numpy_dtype(target))) {
      check_values_fit(arr, target);
      arr = arr.attr("astype")(numpy_dtype(target));
    }
    // A fresh array (from Python values, or converted) is only ours: wrap it without a copy.
    const bool fresh = !arr.is(data);
    t = from_numpy(arr, /*copy=*/!share && !fresh);
  }
  const Device d = to_device(device);
  if (d != t.device()) {
    py::gil_scoped_release release;
    t = t.to(d);
  }
  if (requires_grad) t.set_requires_grad(true);
  return t;
}

void init_interop(py::module_& m, py::class_<Tensor>& cls) {
  // NumPy arrays are accepted wherever a Tensor is (shared when possible, see above).
  py::implicitly_convertible<py::array, Tensor>();

  m.def(
      "tensor",
      [](py::object data, py::object dtype, py::object device, bool requires_grad) {
        return tensor_from_data(data, dtype, device, requires_grad, /*share=*/false);
      },
      py::arg("data"), py::arg("dtype") = py::none(), py::arg("device") = py::none(),
      py::arg("requires_grad") = false,
      "A new tensor holding a copy of `data` (a NumPy array, a Tensor, a scalar or nested lists).\n"
      "Python floats and bools become float32, ints int64; NumPy arrays keep their dtype.");
  m.def(
      "as_tensor",
      [](py::object data, py::object dtype, py::object device) {
        return tensor_from_data(data, dtype, device, false, /*share=*/true);
      },
      py::arg("data"), py::arg("dtype") = py::none(), py::arg("device") = py::none(),
      "Like tensor(), but shares memory with a compatible NumPy array or Tensor instead of "
      "copying.");
  m.def(
      "from_numpy", [](py::array a) { return from_numpy(a, false); }, py::arg("array"),
      "A CPU tensor sharing `array`'s memory (C-contiguous, aligned, writeable, "
      "float32/float64/int32/"
      "int64; other arrays are copied). The tensor keeps the array alive.");

  cls.def(
         "numpy", [](const Tensor& t, bool force_copy) { return to_numpy(t, force_copy); },
         py::arg("copy") = false,
         "The values as a NumPy array: sharing memory for a contiguous CPU tensor (the array keeps "
         "the "
         "tensor's storage alive), else a copy.")
      .def(
          "__array__",
          [](const Tensor& t, py::object dtype, py::object copy) {
            py::array a = to_numpy(t, !copy.is_none() && copy.cast<bool>());
            if (!dtype.is_none()) a = a.attr("astype")(dtype, py::arg("copy") = false);
            return a;
          },
          py::arg("dtype") = py::none(), py::arg("copy") = py::none())
      .def("tolist", [](const Tensor& t) { return to_numpy(t, false).attr("tolist")(); });
  // NumPy's binary operators defer to Tensor's reflected ones (array + tensor -> Tensor).
  cls.attr("__array_ufunc__") = py::none();

  init_dlpack(m, cls);
}

}  // namespace encore::python
