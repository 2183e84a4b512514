// encore.Tensor: geometry, conversions, autograd hooks and the arithmetic operators. The
// operators are the hot path of eager Python code, so each is one direct pybind11 call into
// the C++ op (no Python-level wrapper); Python scalars take the scalar overloads.
#include <optional>

#include "bindings.h"

namespace encore::python {

namespace {

// `self op= other` writes `self op other` into self's memory, as NumPy and PyTorch do: a NumPy
// array sharing it sees the change, and `p -= lr * p.grad` under no_grad updates the parameter
// (inside a traced function too). With grad mode on, a tensor that requires grad cannot be
// written in place: the result of an op (`loss += term`) is rebound to the new value, keeping
// its history. A leaf (a parameter) is an error, as in PyTorch; so is a view, whose write the
// user means to reach the tensor it views: a rebinding would silently lose it.
template <class F> py::object in_place(py::object self, const char* op, F compute) {
  Tensor& t = self.cast<Tensor&>();
  if (t.requires_grad() && GradMode::enabled()) {
    ENCORE_CHECK(!t.is_leaf(), ValueError, "[", op, "] cannot update ",
                 t.name().empty() ? describe(t) : "'" + t.name() + "' " + describe(t),
                 " in place: it requires grad and grad mode is on. Update parameters under "
                 "`with encore.no_grad():`, as an optimizer step does");
    ENCORE_CHECK(!t.impl()->view, ValueError, "[", op, "] cannot update ", describe(t),
                 " in place: it is a view of another tensor, requires grad and grad mode is on, "
                 "and autograd does not follow writes through views. Build the new value with ops "
                 "(e.g. concat), or write under `with encore.no_grad():`");
    return py::cast(compute(t));
  }
  t.copy_(compute(t));
  return self;
}

py::tuple shape_tuple(const Shape& s) {
  py::tuple t(s.size());
  for (int i = 0; i < s.size(); ++i) t[i] = py::int_(s[i]);
  return t;
}

py::object item(const Tensor& t) {
  check_readable(t, "item");
  ENCORE_CHECK(t.numel() == 1, ValueError, "[item] needs a tensor with one element, got ",
               describe(t));
  if (is_floating(t.dtype())) return py::float_(t.item());
  return py::int_(t.to_vector<int64_t>()[0]);
}

// .to(device), .to(dtype), .to("cuda"), .to("float64"), .to(device=..., dtype=...).
Tensor to(const Tensor& t, const py::args& args, const py::kwargs& kwargs) {
  std::optional<DType> dtype;
  std::optional<Device> device;
  for (py::handle a : args) {
    if (py::isinstance<DType>(a)) {
      dtype = a.cast<DType>();
    } else if (py::isinstance<Device>(a)) {
      device = a.cast<Device>();
    } else if (py::isinstance<py::str>(a)) {
      const std::string s = a.cast<std::string>();
      if (s == "cpu" || s.rfind("cuda", 0) == 0)
        device = to_device(a);
      else
        dtype = to_dtype(a);
    } else {
      dtype = to_dtype(a);
    }
  }
  for (auto [k, v] : kwargs) {
    const std::string key = k.cast<std::string>();
    if (key == "dtype") {
      if (!v.is_none()) dtype = to_dtype(v);
    } else if (key == "device") {
      if (!v.is_none()) device = to_device(v);
    } else {
      throw py::type_error("to() got an unexpected keyword argument '" + key + "'");
    }
  }
  Tensor r = t;
  if (device) {
    py::gil_scoped_release release;
    r = r.to(*device);
  }
  if (dtype) r = r.to(*dtype);
  return r;
}

}  // namespace

void init_tensor(py::module_& m) {
  py::class_<Tensor> cls(m, "Tensor",
                         "A strided view of device memory. Arithmetic operators, indexing and the "
                         "functions of encore run eagerly, or are recorded inside encore.trace.");

  // Construction: encore.Tensor(data) converts like encore.tensor but shares memory with a
  // compatible NumPy array; it is also the implicit conversion that lets NumPy arrays stand
  // in for tensors in every function.
  cls.def(py::init([](py::object data, py::object dtype, py::object device, bool requires_grad) {
            return tensor_from_data(data, dtype, device, requires_grad, /*share=*/true);
          }),
          py::arg("data"), py::arg("dtype") = py::none(), py::arg("device") = py::none(),
          py::arg("requires_grad") = false);

  // ---- geometry -------------------------------------------------------------------------
  cls.def_property_readonly("shape", [](const Tensor& t) { return shape_tuple(t.shape()); })
      .def_property_readonly("dtype", &Tensor::dtype)
      .def_property_readonly("device", &Tensor::device)
      .def_property_readonly("ndim", &Tensor::dim)
      .def("dim", &Tensor::dim)
      .def("numel", &Tensor::numel)
      .def(
          "size",
          [](const Tensor& t, py::object axis) -> py::object {
            if (axis.is_none()) return shape_tuple(t.shape());
            return py::int_(t.size(axis.cast<int64_t>()));
          },
          py::arg("axis") = py::none())
      .def_property_readonly(
          "strides", [](const Tensor& t) { return shape_tuple(t.strides()); },
          "Strides in elements.")
      .def_property_readonly("offset", &Tensor::offset,
                             "Offset of the first element in its storage, in elements.")
      .def_property_readonly("nbytes", &Tensor::nbytes)
      .def_property_readonly("itemsize", [](const Tensor& t) { return itemsize(t.dtype()); })
      .def("is_contiguous", &Tensor::is_contiguous)
      .def_property_readonly("is_symbolic", &Tensor::is_symbolic,
                             "True for tensors made inside a trace (no data until replay).")
      .def("data_ptr", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()); })
      .def_property_readonly(
          "_storage_serial", [](const Tensor& t) { return t.storage()->serial(); },
          "A number no other storage of the process has: its identity, where data_ptr may be "
          "reused.")
      .def_property("name", &Tensor::name, &Tensor::set_name)
      .def("__len__", [](const Tensor& t) {
        if (t.dim() == 0) throw py::type_error("len() of a 0-d tensor");
        return t.shape()[0];
      });

  // ---- values ---------------------------------------------------------------------------
  cls.def("item", &item)
      .def("__float__", [](const Tensor& t) { return item(t).cast<double>(); })
      .def("__int__", [](const Tensor& t) { return py::int_(item(t)); })
      .def("__bool__",
           [](const Tensor& t) {
             ENCORE_CHECK(
                 t.numel() == 1, ValueError, "[bool] the truth value of a tensor with ", t.numel(),
                 " elements is ambiguous; use .any()-style reductions such as (x > 0).sum()");
             check_readable(t, "bool");
             return t.item() != 0.0;
           })
      .def("__repr__", &Tensor::str)
      .def("__str__", &Tensor::str)
      // Identity hashing, as for any object: `==` builds a mask and is no equivalence.
      .attr("__hash__") = py::module_::import("builtins").attr("object").attr("__hash__");

  // ---- views and copies -----------------------------------------------------------------
  cls.def("reshape",
          [](const Tensor& t, const py::args& shape) {
            return t.reshape(shape_from_args(shape, "reshape", true));
          })
      .def("view",
           [](const Tensor& t, const py::args& shape) {
             // A view shares memory, or is an error: writes through a silent copy were lost.
             Tensor v = t.reshape(shape_from_args(shape, "view", true));
             ENCORE_CHECK(
                 v.storage() == t.storage() || t.numel() == 0, ShapeError, "[view] cannot view ",
                 describe(t), " with strides ", t.strides().str(), " as ", v.shape().str(),
                 " without copying: use reshape (which copies when it must) or contiguous() first");
             return v;
           })
      .def("transpose", &Tensor::transpose, py::arg("axis0"), py::arg("axis1"))
      .def("permute",
           [](const Tensor& t, const py::args& order) {
             // Axes, not sizes: negative ones count from the end.
             const bool packed = order.size() == 1 && !PyIndex_Check(order[0].ptr());
             return t.permute((packed ? order[0] : order).cast<std::vector<int64_t>>());
           })
      .def_property_readonly(
          "T",
          [](const Tensor& t) {
            std::vector<int64_t> order(t.dim());
            for (int i = 0; i < t.dim(); ++i) order[i] = t.dim() - 1 - i;
            return t.permute(order);
          },
          "The tensor with its axes reversed (a view).")
      .def(
          "squeeze",
          [](const Tensor& t, py::object axis) {
            if (!axis.is_none()) return t.squeeze(axis.cast<int64_t>());
            Tensor r = t;
            for (int i = t.dim() - 1; i >= 0; --i)
              if (t.shape()[i] == 1) r = r.squeeze(i);
            return r;
          },
          py::arg("axis") = py::none())
      .def("unsqueeze", &Tensor::unsqueeze, py::arg("axis"))
      .def("flatten", &Tensor::flatten, py::arg("start_axis") = 0)
      .def("expand",
           [](const Tensor& t, const py::args& shape) {
             return t.expand(shape_from_args(shape, "expand"));
           })
      .def("slice", &Tensor::slice, py::arg("axis"), py::arg("start"), py::arg("stop"),
           py::arg("step") = 1)
      .def("contiguous", &Tensor::contiguous)
      .def("clone", &Tensor::clone)
      .def("detach", &Tensor::detach)
      .def("to", &to,
           "to(device_or_dtype, ..., *, dtype=None, device=None): a copy on another device or "
           "with another dtype (the tensor itself when nothing changes).")
      .def("cpu",
           [](const Tensor& t) {
             py::gil_scoped_release release;
             return t.to(Device::cpu());
           })
      .def(
          "cuda",
          [](const Tensor& t, int index) {
            py::gil_scoped_release release;
            return t.to(Device::cuda(index));
          },
          py::arg("index") = 0)
      .def("float", [](const Tensor& t) { return t.to(DType::Float32); })
      .def("double", [](const Tensor& t) { return t.to(DType::Float64); })
      .def("int", [](const Tensor& t) { return t.to(DType::Int32); })
      .def("long", [](const Tensor& t) { return t.to(DType::Int64); });

  // ---- in place -------------------------------------------------------------------------
  cls.def(
         "copy_", [](Tensor& t, const Tensor& src) { return t.copy_(src); }, py::arg("src"))
      .def(
          "fill_", [](Tensor& t, Scalar v) { return t.fill_(v); }, py::arg("value"))
      .def("zero_", [](Tensor& t) { return t.zero_(); })
      .def(
          "set_data", [](Tensor& t, const Tensor& other) { t.set_data(other); }, py::arg("other"),
          "Makes this tensor view `other`'s storage (shapes must match); traces that captured it "
          "retrace.");

  // ---- autograd -------------------------------------------------------------------------
  cls.def_property("requires_grad", &Tensor::requires_grad,
                   [](Tensor& t, bool on) { t.set_requires_grad(on); })
      .def(
          "requires_grad_", [](Tensor& t, bool on) { return t.set_requires_grad(on); },
          py::arg("requires_grad") = true)
      .def_property(
          "grad", [](const Tensor& t) { return wrap(t.grad()); },
          [](Tensor& t, py::object g) {
            if (g.is_none()) {
              t.set_grad(Tensor());
              return;
            }
            const Tensor grad = g.cast<Tensor>();
            ENCORE_CHECK(grad.shape() == t.shape(), ShapeError, "[grad] gradient ", describe(grad),
                         " does not match ", describe(t));
            ENCORE_CHECK(grad.dtype() == t.dtype() && grad.device() == t.device(), DTypeError,
                         "[grad] gradient ", describe(grad), " does not match ", describe(t));
            t.set_grad(grad);
          })
      .def_property_readonly("is_leaf", &Tensor::is_leaf)
      .def(
          "backward",
          [](const Tensor& t, py::object grad) {
            // With the GIL held: gradients accumulate into leaves other threads may share.
            t.backward(grad.is_none() ? Tensor() : grad.cast<Tensor>());
          },
          py::arg("grad") = py::none(),
          "Reverse-mode differentiation; `grad` defaults to 1 for a scalar.");

  // Reductions and math methods (sum, exp, softmax, matmul, ...) come from the op rows
  // (bindings/ops.cpp).

  // ---- operators ------------------------------------------------------------------------
  // One direct call into the C++ op each. The scalar overload comes first: its caster rejects
  // a tensor cheaply, while a failed Tensor load of a float is the slow path of pybind11's
  // overload resolution. NumPy arrays reach the tensor overloads through the implicit
  // conversion.
  const auto op = py::is_operator();
  cls.def(
         "__add__", [](const Tensor& a, Scalar b) { return a + b; }, op)
      .def(
          "__add__", [](const Tensor& a, const Tensor& b) { return a + b; }, op)
      .def(
          "__radd__", [](const Tensor& a, Scalar b) { return b + a; }, op)
      .def(
          "__radd__", [](const Tensor& a, const Tensor& b) { return b + a; }, op)
      .def(
          "__sub__", [](const Tensor& a, Scalar b) { return a - b; }, op)
      .def(
          "__sub__", [](const Tensor& a, const Tensor& b) { return a - b; }, op)
      .def(
          "__rsub__", [](const Tensor& a, Scalar b) { return b - a; }, op)
      .def(
          "__rsub__", [](const Tensor& a, const Tensor& b) { return b - a; }, op)
      .def(
          "__mul__", [](const Tensor& a, Scalar b) { return a * b; }, op)
      .def(
          "__mul__", [](const Tensor& a, const Tensor& b) { return a * b; }, op)
      .def(
          "__rmul__", [](const Tensor& a, Scalar b) { return b * a; }, op)
      .def(
          "__rmul__", [](const Tensor& a, const Tensor& b) { return b * a; }, op)
      .def(
          "__truediv__", [](const Tensor& a, Scalar b) { return a / b; }, op)
      .def(
          "__truediv__", [](const Tensor& a, const Tensor& b) { return a / b; }, op)
      .def(
          "__rtruediv__", [](const Tensor& a, Scalar b) { return b / a; }, op)
      .def(
          "__rtruediv__", [](const Tensor& a, const Tensor& b) { return b / a; }, op)
      .def(
          "__matmul__", [](const Tensor& a, const Tensor& b) { return matmul(a, b); }, op)
      // In place for plain data, rebinding in autograd graphs (see in_place).
      .def(
          "__iadd__",
          [](py::object self, Scalar b) {
            return in_place(self, "+=", [&](const Tensor& a) { return a + b; });
          },
          op)
      .def(
          "__iadd__",
          [](py::object self, const Tensor& b) {
            return in_place(self, "+=", [&](const Tensor& a) { return a + b; });
          },
          op)
      .def(
          "__isub__",
          [](py::object self, Scalar b) {
            return in_place(self, "-=", [&](const Tensor& a) { return a - b; });
          },
          op)
      .def(
          "__isub__",
          [](py::object self, const Tensor& b) {
            return in_place(self, "-=", [&](const Tensor& a) { return a - b; });
          },
          op)
      .def(
          "__imul__",
          [](py::object self, Scalar b) {
            return in_place(self, "*=", [&](const Tensor& a) { return a * b; });
          },
          op)
      .def(
          "__imul__",
          [](py::object self, const Tensor& b) {
            return in_place(self, "*=", [&](const Tensor& a) { return a * b; });
          },
          op)
      .def(
          "__itruediv__",
          [](py::object self, Scalar b) {
            return in_place(self, "/=", [&](const Tensor& a) { return a / b; });
          },
          op)
      .def(
          "__itruediv__",
          [](py::object self, const Tensor& b) {
            return in_place(self, "/=", [&](const Tensor& a) { return a / b; });
          },
          op)
      .def(
          "__rmatmul__", [](const Tensor& a, const Tensor& b) { return matmul(b, a); }, op)
      .def(
          "__pow__", [](const Tensor& a, Scalar p) { return pow(a, p.d); }, op)
      .def(
          "__neg__", [](const Tensor& a) { return -a; }, op)
      .def(
          "__pos__", [](const Tensor& a) { return a; }, op)
      .def(
          "__abs__", [](const Tensor& a) { return abs(a); }, op)
      .def(
          "__lt__", [](const Tensor& a, Scalar b) { return lt(a, b); }, op)
      .def(
          "__lt__", [](const Tensor& a, const Tensor& b) { return lt(a, b); }, op)
      .def(
          "__le__", [](const Tensor& a, Scalar b) { return le(a, b); }, op)
      .def(
          "__le__", [](const Tensor& a, const Tensor& b) { return le(a, b); }, op)
      .def(
          "__gt__", [](const Tensor& a, Scalar b) { return gt(a, b); }, op)
      .def(
          "__gt__", [](const Tensor& a, const Tensor& b) { return gt(a, b); }, op)
      .def(
          "__ge__", [](const Tensor& a, Scalar b) { return ge(a, b); }, op)
      .def(
          "__ge__", [](const Tensor& a, const Tensor& b) { return ge(a, b); }, op)
      .def(
          "__eq__", [](const Tensor& a, Scalar b) { return eq(a, b); }, op)
      .def(
          "__eq__", [](const Tensor& a, const Tensor& b) { return eq(a, b); }, op)
      .def(
          "__ne__", [](const Tensor& a, Scalar b) { return ne(a, b); }, op)
      .def(
          "__ne__", [](const Tensor& a, const Tensor& b) { return ne(a, b); }, op);

  init_indexing(cls);
  init_interop(m, cls);
}

}  // namespace encore::python
