// The op functions of encore._C, bound from the op rows: every row with a public signature
// becomes `encore.<name>` (and a Tensor method where the row says so), its arguments converted
// by the parameter types of the signature (bind_call, bindings/call_args.cpp). Nothing here
// names an op: a new row is a new Python function, and its stub is generated from the same
// signature (bindings/stubgen/).
// Also the random generators, which are objects rather than ops.
#include "bindings.h"
#include "ops/examples.h"
#include "ops/registry.h"

namespace encore::python {

namespace {

py::object to_python(const Signature& s, Outputs out) {
  if (s.returns == "None") return py::none();
  if (s.returns.starts_with("tuple")) {
    py::tuple t(out.size());
    for (size_t i = 0; i < out.size(); ++i) t[i] = wrap(out[i]);
    return t;
  }
  return wrap(out.at(0));
}

std::string docstring(const OpDef& def, const Signature& s) {
  std::string doc = s.str();
  if (def.doc) doc += std::string("\n\n") + def.doc;
  return doc;
}

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

void init_generators(py::module_& m) {
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
}

}  // namespace

void init_ops(py::module_& m) {
  init_generators(m);
  py::object tensor_class = m.attr("Tensor");
  py::list names, methods;
  // defined_ops, not all_ops: listing the functions must not load the CUDA plugin (and with it
  // the CUDA libraries, ~0.9 s) on every import.
  for (const OpDef* def : defined_ops()) {
    if (!def->signature) continue;
    const Signature& s = signature_of(*def);
    const InvokeFn invoke = def->invoke;
    const std::string doc = docstring(*def, s);
    m.def(
        s.name.c_str(),
        [&s, invoke](const py::args& args, const py::kwargs& kwargs) {
          return to_python(s, invoke(bind_call(s, py::handle(), args, kwargs)));
        },
        doc.c_str());
    names.append(s.name);
    if (!def->method) continue;
    methods.append(s.name);
    py::cpp_function method(
        [&s, invoke](py::handle self, const py::args& args, const py::kwargs& kwargs) {
          return to_python(s, invoke(bind_call(s, self, args, kwargs)));
        },
        py::name(s.name.c_str()), py::is_method(tensor_class), doc.c_str());
    py::setattr(tensor_class, s.name.c_str(), method);
  }
  m.attr("_op_functions") = py::tuple(names);
  m.attr("_op_methods") = py::tuple(methods);

  // The op's test cases for tests/python/test_op_table.py (its example, then its edge cases):
  // each one's inputs (float32, on the CPU, the same values as the C++ table), its keyword
  // arguments as written, whether the inputs go into one list argument; and the result of the
  // C++ call of case `index`.
  m.def("_op_examples", [](const std::string& name) {
    const OpDef& def = op(name);
    const Signature& s = signature_of(def);
    const bool as_list = !s.params.empty() && s.params[0].type == ParamType::Tensors;
    py::list cases;
    for (const Example& e : def.examples)
      cases.append(
          py::make_tuple(example_inputs(e, DType::Float32, Device::cpu()), e.args, as_list));
    return cases;
  });
  m.def("_run_op_example",
        [](const std::string& name, size_t index, const std::vector<Tensor>& inputs) {
          const OpDef& def = op(name);
          ENCORE_CHECK(index < def.examples.size(), ValueError, "[", name, "] has ",
                       def.examples.size(), " examples, not ", index + 1);
          return run_example(def, def.examples[index], inputs);
        });
}

}  // namespace encore::python
