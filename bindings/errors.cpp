// C++ exceptions -> Python exceptions, with the same messages. Each encore error kind gets a
// Python class deriving from the natural builtin, so `except ValueError` and
// `except encore.ShapeError` both work.
#include <cstring>

#include "bindings.h"

namespace encore::python {

namespace {

// Created once at import and never freed: the translator may run until the interpreter exits.
PyObject* g_error = nullptr;
PyObject* g_shape_error = nullptr;
PyObject* g_dtype_error = nullptr;
PyObject* g_device_error = nullptr;
PyObject* g_unsupported_error = nullptr;
PyObject* g_backend_error = nullptr;
PyObject* g_oom_error = nullptr;

PyObject* make_exception(py::module_& m, const char* name, PyObject* bases, const char* doc) {
  const std::string qualified = std::string("encore.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
  if (!type) throw py::error_already_set();
  m.attr(name) = py::reinterpret_borrow<py::object>(type);
  return type;
}

PyObject* bases(std::initializer_list<PyObject*> types) {
  PyObject* t = PyTuple_New(static_cast<Py_ssize_t>(types.size()));
  Py_ssize_t i = 0;
  for (PyObject* b : types) {
    Py_INCREF(b);
    PyTuple_SET_ITEM(t, i++, b);
  }
  return t;
}

// PyErr_SetString with a message that is not valid UTF-8 (a name read from a corrupt file)
// would raise UnicodeDecodeError instead of the intended error.
void set_error(PyObject* type, const char* what) {
  PyObject* message = PyUnicode_DecodeUTF8(what, static_cast<Py_ssize_t>(std::strlen(what)),
                                           "backslashreplace");
  if (!message) return;  // MemoryError is set
  PyErr_SetObject(type, message);
  Py_DECREF(message);
}

}  // namespace

void init_errors(py::module_& m) {
  g_error = make_exception(m, "Error", bases({PyExc_RuntimeError}),
                           "Base of encore's runtime errors (device, unsupported, backend).");
  g_shape_error =
      make_exception(m, "ShapeError", bases({PyExc_ValueError}), "Incompatible or invalid shapes.");
  g_dtype_error = make_exception(m, "DTypeError", bases({PyExc_TypeError}), "Wrong element type.");
  g_device_error =
      make_exception(m, "DeviceError", bases({g_error}),
                     "Tensors on the wrong or mixed devices, or a device that is not present.");
  g_unsupported_error = make_exception(m, "UnsupportedError", bases({g_error}),
                                       "A feature this build or configuration does not support.");
  g_backend_error = make_exception(m, "BackendError", bases({g_error}),
                                   "A failure inside a backend library call (BLAS, oneDNN, CUDA).");
  g_oom_error = make_exception(m, "OutOfMemoryError", bases({PyExc_MemoryError}),
                               "An allocation failed; encore stays usable.");

  // Most derived first: every kind is an encore::Error.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const ShapeError& e) {
      set_error(g_shape_error, e.what());
    } catch (const DTypeError& e) {
      set_error(g_dtype_error, e.what());
    } catch (const DeviceError& e) {
      set_error(g_device_error, e.what());
    } catch (const UnsupportedError& e) {
      set_error(g_unsupported_error, e.what());
    } catch (const BackendError& e) {
      set_error(g_backend_error, e.what());
    } catch (const OutOfMemoryError& e) {
      set_error(g_oom_error, e.what());
    } catch (const encore::ValueError& e) {
      set_error(PyExc_ValueError, e.what());
    } catch (const Error& e) {
      set_error(g_error, e.what());
    } catch (const py::cast_error& e) {
      // A Python value of the wrong type reached a C++ parameter: a TypeError in Python terms.
      PyErr_SetString(PyExc_TypeError, e.what());
    }
  });
}

}  // namespace encore::python
