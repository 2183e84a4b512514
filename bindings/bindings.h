// Shared pieces of the pybind11 module encore._C: one init function per area (module.cpp
// calls them in order) and the argument conversions every area uses.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <vector>

#include "encore.h"

namespace py = pybind11;

namespace encore::python {

void init_errors(py::module_& m);
void init_runtime(py::module_& m);  // Device, DType, modes, grad mode, ledger, cuda, autotune
void init_tensor(py::module_& m);
void init_indexing(py::class_<Tensor>& cls);
void init_interop(py::module_& m, py::class_<Tensor>& cls);  // NumPy
void init_dlpack(py::module_& m, py::class_<Tensor>& cls);
void init_ops(py::module_& m);
void init_nn(py::module_& m);
void init_optim(py::module_& m);
void init_trace(py::module_& m);
void init_compare(py::module_& m);      // compare_modes
void init_model(py::module_& m);        // nn::Model, callbacks, schedules, datasets
void init_distributed(py::module_& m);  // encore.distributed
/// Last: routes every function of the module through a wrapper that shortens pybind11's
/// "incompatible function arguments" TypeError (argument_errors.cpp).
void init_argument_errors(py::module_& m);

/// A device from an encore.Device, a string ("cpu", "cuda", "cuda:1") or None (the CPU).
Device to_device(py::handle obj);
/// A dtype from an encore dtype, a string ("float32") or anything numpy.dtype() accepts.
DType to_dtype(py::handle obj);
/// `obj` as a dtype, or `fallback` when it is None.
inline DType to_dtype(py::handle obj, DType fallback) {
  return obj.is_none() ? fallback : to_dtype(obj);
}
/// A shape from an int or a sequence of ints; `op` names the caller in errors. Rejects negative
/// sizes (except one -1, "infer this size", where `infer` allows it, as for reshape) and sizes
/// whose element count overflows.
Shape to_shape(py::handle obj, const char* op, bool infer = false);
/// A shape from `*shape` arguments: f(2, 3) or f((2, 3)).
Shape shape_from_args(const py::args& args, const char* op, bool infer = false);

/// Binds a Python call (`self` first for a method) to a row's signature, as Python would:
/// positional parameters in order, a *varargs parameter takes the remaining positionals (or one
/// sequence), keywords by name, defaults for the rest (bindings/call_args.cpp).
CallArgs bind_call(const Signature& s, py::handle self, const py::args& args,
                   const py::kwargs& kwargs);

/// The Python value of a tensor that may be undefined (None then).
inline py::object wrap(const Tensor& t) { return t.defined() ? py::cast(t) : py::none(); }

/// NumPy interop (numpy.cpp): a tensor sharing the memory of a C-contiguous, aligned, writeable
/// array of a supported dtype; or, with `copy`, a fresh tensor holding its values.
Tensor from_numpy(const py::array& a, bool copy);
/// An array of a tensor's values: sharing its memory when it is a contiguous CPU tensor and
/// `copy` is false, else a copy.
py::array to_numpy(const Tensor& t, bool copy);
/// encore.tensor / encore.Tensor: a tensor from a Tensor, NumPy array, scalar or nested
/// sequence. Python floats become float32, ints int64, NumPy arrays keep their dtype (narrow
/// types widen to a supported one). With `share`, a compatible NumPy array is not copied.
Tensor tensor_from_data(py::handle data, py::handle dtype, py::handle device, bool requires_grad,
                        bool share);
/// Whether `v` is another library's tensor that exports DLPack (a torch or CuPy tensor, a JAX
/// array): not an encore Tensor nor a NumPy array, with __dlpack__ and __dlpack_device__.
bool is_dlpack_producer(py::handle v);
/// A tensor viewing a DLPack producer's memory, zero-copy (encore.from_dlpack).
Tensor tensor_from_dlpack(py::handle v);
DType dtype_of_numpy(const py::dtype& d, const char* op);
py::dtype numpy_dtype(DType t);

/// Whether Python code may still run: false during and after interpreter shutdown, when
/// references held by C++ (storages that outlive the interpreter) are leaked instead.
inline bool python_alive() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsInitialized() && !Py_IsFinalizing();
#else
  return Py_IsInitialized() && !_Py_IsFinalizing();
#endif
}

/// A shared_ptr that keeps a Python object alive; its deleter takes the GIL (storages can be
/// released from threads that do not hold it) and does nothing once Python has shut down.
std::shared_ptr<void> keep_alive(py::object obj);

}  // namespace encore::python

namespace pybind11::detail {
/// A Python number as an encore::Scalar: ints stay exact (an int beyond int64 becomes a
/// double, which an integer tensor then rejects as out of range), floats are doubles. It
/// accepts float and int (and bool) without conversion, and other numbers (NumPy scalars) when
/// converting, but never arrays or tensors: listed before the Tensor overload, it lets
/// `t * 0.5` and `t * u` both resolve on the first, cheap try (a failed Tensor load is the
/// slow path of overload resolution).
template <> struct type_caster<encore::Scalar> {
  PYBIND11_TYPE_CASTER(encore::Scalar, const_name("float"));
  bool load(handle src, bool convert) {
    PyObject* o = src.ptr();
    if (PyFloat_Check(o)) {
      value = encore::Scalar(PyFloat_AS_DOUBLE(o));
      return true;
    }
    if (PyLong_Check(o)) return load_int(o);
    // NumPy scalars and other numbers; arrays and tensors (sequences, buffers) are not scalars.
    if (!convert || !PyNumber_Check(o) || PySequence_Check(o)) return false;
    if (PyIndex_Check(o)) {
      const object i = reinterpret_steal<object>(PyNumber_Index(o));
      if (i) return load_int(i.ptr());
      PyErr_Clear();
      return false;
    }
    const double d = PyFloat_AsDouble(o);
    if (d == -1.0 && PyErr_Occurred()) {
      PyErr_Clear();
      return false;
    }
    value = encore::Scalar(d);
    return true;
  }
  static handle cast(encore::Scalar s, return_value_policy, handle) {
    return s.integral ? PyLong_FromLongLong(s.i) : PyFloat_FromDouble(s.d);
  }

 private:
  bool load_int(PyObject* o) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (!overflow) {
      if (v == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return false;
      }
      value = encore::Scalar(static_cast<int64_t>(v));
      return true;
    }
    const double d = PyLong_AsDouble(o);  // beyond double too: not a scalar we can hold
    if (d == -1.0 && PyErr_Occurred()) {
      PyErr_Clear();
      return false;
    }
    value = encore::Scalar(d);
    return true;
  }
};
}  // namespace pybind11::detail
