// C++ exceptions -> Python exceptions, with the same messages. `encore.Error` is the base of
// every encore error, and each kind also derives from the natural builtin, so
// `except encore.Error`, `except encore.ShapeError` and `except ValueError` all work.
#include <cstring>
#include <map>

#include "bindings.h"

namespace encore::python {

namespace {

// Created once at import and never freed: the translator may run until the interpreter exits.
PyObject* g_error = nullptr;
PyObject* g_shape_error = nullptr;
PyObject* g_dtype_error = nullptr;
PyObject* g_value_error = nullptr;
PyObject* g_device_error = nullptr;
PyObject* g_unsupported_error = nullptr;
PyObject* g_backend_error = nullptr;
PyObject* g_oom_error = nullptr;
PyObject* g_file_error = nullptr;
PyObject* g_distributed_error = nullptr;

PyObject* make_exception(py::module_& m, const char* name, std::initializer_list<PyObject*> bases,
                         const char* doc) {
  py::tuple base_tuple(bases.size());
  size_t i = 0;
  for (PyObject* b : bases) base_tuple[i++] = py::reinterpret_borrow<py::object>(b);
  const std::string qualified = std::string("encore.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, base_tuple.ptr(), nullptr);
  if (!type) throw py::error_already_set();
  m.attr(name) = py::reinterpret_borrow<py::object>(type);
  return type;
}

// PyErr_SetString with a message that is not valid UTF-8 (a name read from a corrupt file)
// would raise UnicodeDecodeError instead of the intended error.
void set_error(PyObject* type, const char* what) {
  PyObject* message =
      PyUnicode_DecodeUTF8(what, static_cast<Py_ssize_t>(std::strlen(what)), "backslashreplace");
  if (!message) return;  // MemoryError is set
  PyErr_SetObject(type, message);
  Py_DECREF(message);
}

// Per errno, encore's class that is both a FileError and the builtin OSError subclass errno
// selects (FileNotFoundError, PermissionError, ...), made on first use; FileError itself for an
// errno without a subclass (ENOSPC, EFBIG) or none (0: not a regular file).
PyObject* file_error_type(int code) {
  static std::map<PyObject*, PyObject*> made;  // builtin subclass -> ours; never freed
  if (code == 0) return g_file_error;
  const py::object probe = py::reinterpret_borrow<py::object>(PyExc_OSError)(code, "");
  PyObject* builtin = reinterpret_cast<PyObject*>(Py_TYPE(probe.ptr()));
  if (builtin == PyExc_OSError) return g_file_error;
  PyObject*& type = made[builtin];
  if (!type) {
    const std::string name =
        std::string("encore.") + reinterpret_cast<PyTypeObject*>(builtin)->tp_name;
    const py::tuple bases = py::make_tuple(py::handle(g_file_error), py::handle(builtin));
    type = PyErr_NewException(name.c_str(), bases.ptr(), nullptr);
    if (!type) throw py::error_already_set();
  }
  return type;
}

// The exception's errno, strerror (the whole message, which str() shows) and filename (the
// path as the file system encodes it).
void set_file_error(const FileError& e) {
  PyObject* type = file_error_type(e.code());
  const char* what = e.what();
  py::object message = py::reinterpret_steal<py::object>(
      PyUnicode_DecodeUTF8(what, static_cast<Py_ssize_t>(std::strlen(what)), "backslashreplace"));
  py::object path = py::reinterpret_steal<py::object>(
      PyUnicode_DecodeFSDefaultAndSize(e.path().data(), static_cast<Py_ssize_t>(e.path().size())));
  if (!message || !path) return;  // the decoding error is set
  const py::object code = e.code() ? py::object(py::int_(e.code())) : py::object(py::none());
  const py::object error = py::reinterpret_borrow<py::object>(type)(code, message, path);
  PyErr_SetObject(type, error.ptr());
}

}  // namespace

void init_errors(py::module_& m) {
  g_error = make_exception(m, "Error", {PyExc_Exception}, "Base of every encore error.");
  g_shape_error = make_exception(m, "ShapeError", {g_error, PyExc_ValueError},
                                 "Incompatible or invalid shapes.");
  g_dtype_error =
      make_exception(m, "DTypeError", {g_error, PyExc_TypeError}, "Wrong element type.");
  g_value_error = make_exception(
      m, "InvalidValueError", {g_error, PyExc_ValueError},
      "A bad argument value, or reading a value that does not exist yet (inside a trace).");
  g_device_error =
      make_exception(m, "DeviceError", {g_error, PyExc_RuntimeError},
                     "Tensors on the wrong or mixed devices, or a device that is not present.");
  g_unsupported_error = make_exception(m, "UnsupportedError", {g_error, PyExc_RuntimeError},
                                       "A feature this build or configuration does not support.");
  g_backend_error = make_exception(m, "BackendError", {g_error, PyExc_RuntimeError},
                                   "A failure inside a backend library call (BLAS, oneDNN, CUDA).");
  g_oom_error = make_exception(m, "OutOfMemoryError", {g_error, PyExc_MemoryError},
                               "An allocation failed; encore stays usable.");
  g_file_error =
      make_exception(m, "FileError", {g_error, PyExc_OSError},
                     "A file could not be written or read: errno (its OSError subclass too, e.g. "
                     "FileNotFoundError), the message as strerror, the path as filename.");
  // Shown as encore's message, which names the path, rather than "[Errno 2] ...: 'path'".
  py::setattr(py::handle(g_file_error), "__str__",
              py::module_::import("builtins").attr("eval")("lambda self: str(self.strerror)"));
  g_distributed_error = make_exception(
      m, "DistributedError", {g_error, PyExc_RuntimeError},
      "A collective that failed or timed out, or ranks that traced different steps.");

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
    } catch (const FileError& e) {
      set_file_error(e);
    } catch (const DistributedError& e) {
      set_error(g_distributed_error, e.what());
    } catch (const encore::ValueError& e) {
      set_error(g_value_error, e.what());
    } catch (const Error& e) {
      set_error(g_error, e.what());
    } catch (const py::cast_error& e) {
      // A Python value of the wrong type reached a C++ parameter: a TypeError in Python terms.
      PyErr_SetString(PyExc_TypeError, e.what());
    }
  });
}

}  // namespace encore::python
