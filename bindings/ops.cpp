// The free functions of ops/ops.h (encore.exp, encore.matmul, encore.conv1d, ...), creation
// functions and random generators. Each is one pybind11 call into the C++ op.
#include "bindings.h"

namespace encore::python {

namespace {

Padding to_padding(py::handle p) {
  if (py::isinstance<py::str>(p)) return Padding::parse(p.cast<std::string>());
  if (PyIndex_Check(p.ptr())) {
    const int64_t v = p.cast<int64_t>();
    return Padding::explicit_(v, v);
  }
  if (py::isinstance<py::sequence>(p) && py::len(p) == 2) {
    auto s = py::reinterpret_borrow<py::sequence>(p);
    return Padding::explicit_(s[0].cast<int64_t>(), s[1].cast<int64_t>());
  }
  throw py::type_error(
      "[conv1d] padding must be 'valid', 'same', an int or a (left, right) pair, got " +
      std::string(py::repr(p)));
}

Tensor finish(Tensor t, bool requires_grad) {
  if (requires_grad) t.set_requires_grad(true);
  return t;
}

Generator* to_generator(py::handle g) { return g.is_none() ? nullptr : &g.cast<Generator&>(); }

// A seed is an integer in [0, 2**64): a negative one is a mistake, not a value to wrap around.
uint64_t to_seed(py::handle seed, const char* op) {
  if (!PyIndex_Check(seed.ptr()))
    throw py::type_error(std::string("[") + op + "] seed must be an int, got " +
                         Py_TYPE(seed.ptr())->tp_name);
  const auto value = py::reinterpret_steal<py::int_>(PyNumber_Index(seed.ptr()));
  if (!value) throw py::error_already_set();
  const unsigned long long s = PyLong_AsUnsignedLongLong(value.ptr());
  if (s == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    PyErr_Clear();
    throw ValueError(detail::cat("[", op, "] seed must be an integer in [0, 2**64), got ",
                                 std::string(py::str(value))));
  }
  return s;
}

// arange(stop), arange(start, stop[, step]); integers make int64 unless a dtype is given.
Tensor arange_py(py::object a, py::object b, py::object step, py::object dtype, py::object device,
                 bool requires_grad) {
  const bool ints = PyIndex_Check(a.ptr()) && (b.is_none() || PyIndex_Check(b.ptr())) &&
                    PyIndex_Check(step.ptr());
  const Scalar start = b.is_none() ? Scalar(0) : a.cast<Scalar>();
  const Scalar stop = b.is_none() ? a.cast<Scalar>() : b.cast<Scalar>();
  const DType dt = to_dtype(dtype, ints ? DType::Int64 : DType::Float32);
  return finish(arange(start, stop, step.cast<Scalar>(), dt, to_device(device)), requires_grad);
}

}  // namespace

void init_ops(py::module_& m) {
  // ---- creation -------------------------------------------------------------------------
  auto filled = [](Scalar value) {
    return [value](const py::args& shape, py::object dtype, py::object device, bool requires_grad) {
      return finish(full(shape_from_args(shape, "full"), value, to_dtype(dtype, DType::Float32),
                         to_device(device)),
                    requires_grad);
    };
  };
  m.def("zeros", filled(0), py::arg("dtype") = py::none(), py::arg("device") = py::none(),
        py::arg("requires_grad") = false,
        "zeros(*shape, dtype=float32, device='cpu', requires_grad=False)");
  m.def("ones", filled(1), py::arg("dtype") = py::none(), py::arg("device") = py::none(),
        py::arg("requires_grad") = false,
        "ones(*shape, dtype=float32, device='cpu', requires_grad=False)");
  m.def(
      "empty",
      [](const py::args& shape, py::object dtype, py::object device) {
        return Tensor::empty(shape_from_args(shape, "empty"), to_dtype(dtype, DType::Float32),
                             to_device(device));
      },
      py::arg("dtype") = py::none(), py::arg("device") = py::none(), "An uninitialized tensor.");
  m.def(
      "full",
      [](py::object shape, Scalar value, py::object dtype, py::object device, bool requires_grad) {
        return finish(full(to_shape(shape, "full"), value, to_dtype(dtype, DType::Float32),
                           to_device(device)),
                      requires_grad);
      },
      py::arg("shape"), py::arg("fill_value"), py::arg("dtype") = py::none(),
      py::arg("device") = py::none(), py::arg("requires_grad") = false);
  auto like = [](Scalar value) {
    return [value](const Tensor& t, py::object dtype, py::object device) {
      return full(t.shape(), value, to_dtype(dtype, t.dtype()),
                  device.is_none() ? t.device() : to_device(device));
    };
  };
  m.def("zeros_like", like(0), py::arg("t"), py::arg("dtype") = py::none(),
        py::arg("device") = py::none());
  m.def("ones_like", like(1), py::arg("t"), py::arg("dtype") = py::none(),
        py::arg("device") = py::none());
  m.def(
      "full_like",
      [](const Tensor& t, Scalar value, py::object dtype, py::object device) {
        return full(t.shape(), value, to_dtype(dtype, t.dtype()),
                    device.is_none() ? t.device() : to_device(device));
      },
      py::arg("t"), py::arg("fill_value"), py::arg("dtype") = py::none(),
      py::arg("device") = py::none());
  m.def("arange", &arange_py, py::arg("start"), py::arg("stop") = py::none(), py::arg("step") = 1,
        py::arg("dtype") = py::none(), py::arg("device") = py::none(),
        py::arg("requires_grad") = false,
        "arange(stop) or arange(start, stop, step=1): int64 for integer bounds, else float32.");

  // ---- random ---------------------------------------------------------------------------
  py::class_<Generator>(
      m, "Generator",
      "A counter-based (Philox) random stream; its state lives on its device, so traced "
      "steps advance it on every replay.")
      .def(py::init([](py::object seed, py::object device) {
             return Generator(to_seed(seed, "Generator"), to_device(device));
           }),
           py::arg("seed") = 0, py::arg("device") = py::none())
      .def(
          "manual_seed",
          [](Generator& g, py::object seed) -> Generator& {
            g.manual_seed(to_seed(seed, "manual_seed"));
            return g;
          },
          py::arg("seed"), py::return_value_policy::reference_internal)
      .def_property_readonly("seed", &Generator::seed)
      .def_property_readonly("offset", &Generator::offset)
      .def_property_readonly("device", &Generator::device)
      .def_property_readonly("state", &Generator::state);
  m.def(
      "default_generator",
      [](py::object device) -> Generator& { return Generator::default_for(to_device(device)); },
      py::arg("device") = py::none(), py::return_value_policy::reference);
  m.def(
      "manual_seed", [](py::object seed) { manual_seed(to_seed(seed, "manual_seed")); },
      py::arg("seed"), "Seeds the default generator of every device.");
  auto random = [](bool is_normal) {
    return [is_normal](const py::args& shape, py::object dtype, py::object device,
                       py::object generator, bool requires_grad) {
      const Shape s = shape_from_args(shape, is_normal ? "randn" : "rand");
      const DType dt = to_dtype(dtype, DType::Float32);
      const Device d = to_device(device);
      return finish(is_normal ? normal(s, 0.0, 1.0, dt, d, to_generator(generator))
                              : uniform(s, 0.0, 1.0, dt, d, to_generator(generator)),
                    requires_grad);
    };
  };
  m.def("randn", random(true), py::arg("dtype") = py::none(), py::arg("device") = py::none(),
        py::arg("generator") = py::none(), py::arg("requires_grad") = false,
        "randn(*shape, dtype=float32, device='cpu', generator=None): standard normal values.");
  m.def("rand", random(false), py::arg("dtype") = py::none(), py::arg("device") = py::none(),
        py::arg("generator") = py::none(), py::arg("requires_grad") = false,
        "rand(*shape, ...): uniform values on [0, 1).");
  m.def(
      "normal",
      [](py::object shape, double mean, double std, py::object dtype, py::object device,
         py::object generator, bool requires_grad) {
        return finish(normal(to_shape(shape, "normal"), mean, std, to_dtype(dtype, DType::Float32),
                             to_device(device), to_generator(generator)),
                      requires_grad);
      },
      py::arg("shape"), py::arg("mean") = 0.0, py::arg("std") = 1.0, py::kw_only(),
      py::arg("dtype") = py::none(), py::arg("device") = py::none(),
      py::arg("generator") = py::none(), py::arg("requires_grad") = false);
  m.def(
      "uniform",
      [](py::object shape, double low, double high, py::object dtype, py::object device,
         py::object generator, bool requires_grad) {
        return finish(
            uniform(to_shape(shape, "uniform"), low, high, to_dtype(dtype, DType::Float32),
                    to_device(device), to_generator(generator)),
            requires_grad);
      },
      py::arg("shape"), py::arg("low") = 0.0, py::arg("high") = 1.0, py::kw_only(),
      py::arg("dtype") = py::none(), py::arg("device") = py::none(),
      py::arg("generator") = py::none(), py::arg("requires_grad") = false);

  // ---- elementwise ----------------------------------------------------------------------
  m.def(
      "neg", [](const Tensor& x) { return neg(x); }, py::arg("x"));
  m.def(
      "exp", [](const Tensor& x) { return exp(x); }, py::arg("x"));
  m.def(
      "log", [](const Tensor& x) { return log(x); }, py::arg("x"));
  m.def(
      "sqrt", [](const Tensor& x) { return sqrt(x); }, py::arg("x"));
  m.def(
      "tanh", [](const Tensor& x) { return tanh(x); }, py::arg("x"));
  m.def(
      "sigmoid", [](const Tensor& x) { return sigmoid(x); }, py::arg("x"));
  m.def(
      "relu", [](const Tensor& x) { return relu(x); }, py::arg("x"));
  m.def(
      "abs", [](const Tensor& x) { return abs(x); }, py::arg("x"));
  m.def(
      "softplus", [](const Tensor& x) { return softplus(x); }, py::arg("x"));
  m.def(
      "leaky_relu", [](const Tensor& x, double alpha) { return leaky_relu(x, alpha); },
      py::arg("x"), py::arg("alpha") = 0.3);
  m.def(
      "pow", [](const Tensor& x, double p) { return pow(x, p); }, py::arg("x"), py::arg("p"));
  m.def(
      "clip", [](const Tensor& x, Scalar lo, Scalar hi) { return clip(x, lo, hi); }, py::arg("x"),
      py::arg("min"), py::arg("max"));
  m.def(
      "activation",
      [](const Tensor& x, const std::string& name) {
        return activation(x, parse_activation(name));
      },
      py::arg("x"), py::arg("name"),
      "Applies a Keras activation by name ('linear', 'relu', 'tanh', ...).");

  m.def(
      "add", [](const Tensor& a, Scalar b) { return add(a, b); }, py::arg("a"), py::arg("b"));
  m.def(
      "add", [](const Tensor& a, const Tensor& b) { return add(a, b); }, py::arg("a"),
      py::arg("b"));
  m.def(
      "sub", [](const Tensor& a, Scalar b) { return a - b; }, py::arg("a"), py::arg("b"));
  m.def(
      "sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); }, py::arg("a"),
      py::arg("b"));
  m.def(
      "mul", [](const Tensor& a, Scalar b) { return mul(a, b); }, py::arg("a"), py::arg("b"));
  m.def(
      "mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); }, py::arg("a"),
      py::arg("b"));
  m.def(
      "div", [](const Tensor& a, Scalar b) { return a / b; }, py::arg("a"), py::arg("b"));
  m.def(
      "div", [](const Tensor& a, const Tensor& b) { return div(a, b); }, py::arg("a"),
      py::arg("b"));
  m.def(
      "maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }, py::arg("a"),
      py::arg("b"));
  m.def(
      "minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }, py::arg("a"),
      py::arg("b"));
  m.def(
      "eq", [](const Tensor& a, const Tensor& b) { return eq(a, b); }, py::arg("a"), py::arg("b"));
  m.def(
      "ne", [](const Tensor& a, const Tensor& b) { return ne(a, b); }, py::arg("a"), py::arg("b"));
  m.def(
      "gt", [](const Tensor& a, Scalar b) { return gt(a, b); }, py::arg("a"), py::arg("b"));
  m.def(
      "gt", [](const Tensor& a, const Tensor& b) { return gt(a, b); }, py::arg("a"), py::arg("b"));
  m.def(
      "ge", [](const Tensor& a, const Tensor& b) { return ge(a, b); }, py::arg("a"), py::arg("b"));
  m.def(
      "lt", [](const Tensor& a, Scalar b) { return lt(a, b); }, py::arg("a"), py::arg("b"));
  m.def(
      "lt", [](const Tensor& a, const Tensor& b) { return lt(a, b); }, py::arg("a"), py::arg("b"));
  m.def(
      "le", [](const Tensor& a, const Tensor& b) { return le(a, b); }, py::arg("a"), py::arg("b"));

  // ---- reductions -----------------------------------------------------------------------
  m.def(
      "sum",
      [](const Tensor& x, py::object axis, bool keepdims) {
        return sum(x, to_axes(axis), keepdims);
      },
      py::arg("x"), py::arg("axis") = py::none(), py::arg("keepdims") = false);
  m.def(
      "mean",
      [](const Tensor& x, py::object axis, bool keepdims) {
        return mean(x, to_axes(axis), keepdims);
      },
      py::arg("x"), py::arg("axis") = py::none(), py::arg("keepdims") = false);
  m.def(
      "max",
      [](const Tensor& x, py::object axis, bool keepdims) {
        return max(x, to_axes(axis), keepdims);
      },
      py::arg("x"), py::arg("axis") = py::none(), py::arg("keepdims") = false);
  m.def(
      "sum_to",
      [](const Tensor& x, py::object shape) { return sum_to(x, to_shape(shape, "sum_to")); },
      py::arg("x"), py::arg("shape"));

  // ---- views and data movement ----------------------------------------------------------
  m.def(
      "reshape",
      [](const Tensor& x, py::object shape) { return x.reshape(to_shape(shape, "reshape", true)); },
      py::arg("x"), py::arg("shape"));
  m.def(
      "transpose", [](const Tensor& x, int64_t a, int64_t b) { return x.transpose(a, b); },
      py::arg("x"), py::arg("axis0"), py::arg("axis1"));
  m.def(
      "permute", [](const Tensor& x, std::vector<int64_t> order) { return x.permute(order); },
      py::arg("x"), py::arg("order"));
  m.def(
      "concat", [](const std::vector<Tensor>& xs, int64_t axis) { return concat(xs, axis); },
      py::arg("tensors"), py::arg("axis") = 0);
  m.def(
      "stack", [](const std::vector<Tensor>& xs, int64_t axis) { return stack(xs, axis); },
      py::arg("tensors"), py::arg("axis") = 0);
  m.def(
      "flip", [](const Tensor& x, int64_t axis) { return flip(x, axis); }, py::arg("x"),
      py::arg("axis"));

  // ---- linear algebra, convolution, nn blocks -------------------------------------------
  m.def(
      "matmul", [](const Tensor& a, const Tensor& b) { return matmul(a, b); }, py::arg("a"),
      py::arg("b"));
  m.def(
      "conv1d",
      [](const Tensor& x, const Tensor& w, int64_t stride, py::object padding, int64_t dilation) {
        return conv1d(x, w, stride, to_padding(padding), dilation);
      },
      py::arg("x"), py::arg("w"), py::arg("stride") = 1, py::arg("padding") = "valid",
      py::arg("dilation") = 1,
      "x: (batch, steps, in_channels), w: (kernel_size, in_channels, filters) -> (batch, "
      "out_steps, filters).\n"
      "padding: 'valid', 'same', an int or a (left, right) pair.");
  m.def(
      "softmax", [](const Tensor& x, int64_t axis) { return softmax(x, axis); }, py::arg("x"),
      py::arg("axis") = -1);
  m.def(
      "log_softmax", [](const Tensor& x, int64_t axis) { return log_softmax(x, axis); },
      py::arg("x"), py::arg("axis") = -1);
  m.def(
      "dropout",
      [](const Tensor& x, double p, py::object training_flag, py::object generator) {
        const bool on = training_flag.is_none() ? training() : training_flag.cast<bool>();
        return dropout(x, p, on, to_generator(generator));
      },
      py::arg("x"), py::arg("p"), py::arg("training") = py::none(),
      py::arg("generator") = py::none(),
      "Inverted dropout; `training` defaults to encore's training mode.");
  m.def(
      "gather_last", [](const Tensor& x, const Tensor& index) { return gather_last(x, index); },
      py::arg("x"), py::arg("index"));
  m.def(
      "scatter_last",
      [](const Tensor& g, const Tensor& index, int64_t n) { return scatter_last(g, index, n); },
      py::arg("g"), py::arg("index"), py::arg("n"));
  m.def(
      "lstm_cell",
      [](const Tensor& z, const Tensor& c, const std::string& act, const std::string& rec) {
        return lstm_cell(z, c, parse_activation(act), parse_activation(rec));
      },
      py::arg("z"), py::arg("c_prev"), py::arg("activation") = "tanh",
      py::arg("recurrent_activation") = "sigmoid",
      "One fused LSTM step on pre-activations z (batch, 4*units) in gate order i, f, c, o: returns "
      "(h, c).");
}

}  // namespace encore::python
