// Basic indexing, NumPy style: ints (negative from the end), slices (any step), Ellipsis and
// None. Everything maps to slice/reshape views of the same storage, so `t[1]` and `t[:, 2:5]`
// share memory and are differentiable; only a negative step copies (a flip).
#include "bindings.h"

namespace encore::python {

namespace {

[[noreturn]] void unsupported_index(py::handle item) {
  throw py::type_error("encore tensors support indexing with ints, slices, '...' and None; got " +
                       std::string(py::str(py::type::handle_of(item).attr("__name__"))) +
                       " (index tensors and lists are not supported)");
}

bool is_int_index(py::handle h) { return PyIndex_Check(h.ptr()) && !PyBool_Check(h.ptr()); }

Tensor index(const Tensor& t, py::handle key, bool for_write) {
  py::tuple items =
      py::isinstance<py::tuple>(key) ? py::reinterpret_borrow<py::tuple>(key) : py::make_tuple(key);
  int consuming = 0, ellipses = 0;
  for (py::handle item : items) {
    if (is_int_index(item) || PySlice_Check(item.ptr()))
      ++consuming;
    else if (item.ptr() == Py_Ellipsis)
      ++ellipses;
    else if (!item.is_none())
      unsupported_index(item);
  }
  if (ellipses > 1) throw py::index_error("an index can only have a single ellipsis ('...')");
  if (consuming > t.dim())
    throw py::index_error("too many indices for a tensor of rank " + std::to_string(t.dim()) +
                          ": " + std::to_string(consuming) + " were given");
  Tensor r = t;
  int axis = 0;
  for (py::handle item : items) {
    if (item.is_none()) {
      r = r.unsqueeze(axis++);
    } else if (item.ptr() == Py_Ellipsis) {
      axis += t.dim() - consuming;
    } else if (is_int_index(item)) {
      const int64_t n = r.shape()[axis];
      const Py_ssize_t raw = PyNumber_AsSsize_t(item.ptr(), PyExc_IndexError);
      if (raw == -1 && PyErr_Occurred()) throw py::error_already_set();
      const int64_t i = raw < 0 ? raw + n : raw;
      if (i < 0 || i >= n)
        throw py::index_error("index " + std::to_string(raw) + " is out of range for axis " +
                              std::to_string(axis) + " with size " + std::to_string(n));
      r = r.slice(axis, i, i + 1).squeeze(axis);
    } else {
      const int64_t n = r.shape()[axis];
      Py_ssize_t start, stop, step;
      if (PySlice_Unpack(item.ptr(), &start, &stop, &step) < 0) throw py::error_already_set();
      const Py_ssize_t len = PySlice_AdjustIndices(n, &start, &stop, step);
      if (step > 0) {
        if (!(start == 0 && stop >= n && step == 1)) r = r.slice(axis, start, stop, step);
      } else if (len == 0) {
        r = r.slice(axis, 0, 0);
      } else {
        if (for_write)
          throw py::index_error(
              "assignment through a negative-step slice is not supported (it would be a copy)");
        const int64_t lo = start + (len - 1) * step;
        r = flip(r.slice(axis, lo, start + 1, -step), axis);
      }
      ++axis;
    }
  }
  return r;
}

}  // namespace

void init_indexing(py::class_<Tensor>& cls) {
  cls.def("__getitem__", [](const Tensor& t, py::handle key) { return index(t, key, false); })
      .def("__setitem__", [](Tensor& t, py::handle key, py::handle value) {
        Tensor view = index(t, key, true);
        // numpy.asarray(None) is an object array that astype() turns into NaN.
        if (value.is_none()) throw py::type_error("cannot assign None to tensor elements");
        if (py::isinstance<Tensor>(value)) {
          view.copy_(value.cast<Tensor>());
        } else if (PyFloat_Check(value.ptr()) || PyLong_Check(value.ptr())) {
          view.fill_(value.cast<Scalar>());
        } else {
          view.copy_(
              tensor_from_data(value, py::cast(t.dtype()), py::cast(t.device()), false, true));
        }
      });
}

}  // namespace encore::python
