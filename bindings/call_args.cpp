// Python arguments bound to a row's signature (ops/signature.h): the one binder of the op
// functions (bindings/ops.cpp) and of the layer classes' __init__ (bindings/nn.cpp). Each value
// is converted by its parameter's type; argument errors name the function and the parameter,
// never the value.
#include "bindings.h"

namespace encore::python {

namespace {

const char* type_name(py::handle v) { return v.is_none() ? "None" : Py_TYPE(v.ptr())->tp_name; }

[[noreturn]] void wrong_type(const Signature& s, const Param& p, const char* expected,
                             py::handle v) {
  throw py::type_error(detail::cat("[", s.name, "] argument '", p.name, "' must be ", expected,
                                   p.optional ? " or None" : "", ", got ", type_name(v)));
}

// "[matmul] expected a Tensor or NumPy array for argument 'b', got list (convert with ...)":
// never the value itself (a list of a million numbers makes a message of megabytes).
[[noreturn]] void tensor_expected(const Signature& s, const Param& p, py::handle v) {
  throw py::type_error(detail::cat("[", s.name, "] expected a Tensor or NumPy array for argument '",
                                   p.name, "', got ", type_name(v),
                                   v.is_none() ? "" : " (convert with encore.tensor(...))"));
}

// Another library's tensor (torch, CuPy, JAX) is taken through DLPack, zero-copy.
bool is_tensor_like(py::handle v) {
  return py::isinstance<Tensor>(v) || py::isinstance<py::array>(v) || is_dlpack_producer(v);
}

// Arrays share their memory where they can, as everywhere in the bindings.
Tensor as_tensor_arg(py::handle v) {
  if (py::isinstance<Tensor>(v)) return v.cast<Tensor>();
  if (is_dlpack_producer(v)) return tensor_from_dlpack(v);
  return tensor_from_data(v, py::none(), py::none(), false, /*share=*/true);
}

// Out of the int64 range: a ShapeError for shapes and axes, a ValueError for other ints.
int64_t int_arg(const Signature& s, const Param& p, py::handle v) {
  if (!PyIndex_Check(v.ptr()) || PyBool_Check(v.ptr())) wrong_type(s, p, "an int", v);
  const auto i = py::reinterpret_steal<py::object>(PyNumber_Index(v.ptr()));
  if (!i) throw py::error_already_set();
  int overflow = 0;
  const long long value = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
  if (overflow) {
    const std::string message =
        detail::cat("[", s.name, "] argument '", p.name, "' = ", std::string(py::str(i)),
                    " is out of the int64 range");
    if (p.type == ParamType::Int && !p.varargs) throw ValueError(message);
    throw ShapeError(message);
  }
  return value;
}

// An int or a sequence of ints (shapes, axes, orders).
std::vector<int64_t> ints_arg(const Signature& s, const Param& p, py::handle v) {
  if (PyIndex_Check(v.ptr()) && !PyBool_Check(v.ptr())) return {int_arg(s, p, v)};
  if (!PySequence_Check(v.ptr()) || py::isinstance<py::str>(v) || is_tensor_like(v))
    throw py::type_error(
        detail::cat("[", s.name, "] ", p.name, " entries must be ints, got ", type_name(v)));
  // A tuple owns its items: sequences that make items on access (ranges) stay valid.
  const auto items = py::reinterpret_steal<py::tuple>(PySequence_Tuple(v.ptr()));
  if (!items) throw py::error_already_set();
  std::vector<int64_t> out;
  out.reserve(items.size());
  for (py::handle item : items) {
    if (!PyIndex_Check(item.ptr()) || PyBool_Check(item.ptr()))
      throw py::type_error(
          detail::cat("[", s.name, "] ", p.name, " entries must be ints, got ", type_name(item)));
    out.push_back(int_arg(s, p, item));
  }
  return out;
}

// A number kept exact where it is an int (int64 fills and bounds).
ArgValue number_arg(const Signature& s, const Param& p, py::handle v) {
  py::detail::make_caster<Scalar> caster;
  if (!caster.load(v, true)) wrong_type(s, p, "a number", v);
  const Scalar& n = caster;
  return n.integral ? ArgValue(n.i) : ArgValue(n.d);
}

bool bool_arg(const Signature& s, const Param& p, py::handle v) {
  if (PyBool_Check(v.ptr())) return v.ptr() == Py_True;
  // numpy.bool_ and other bools that are not ints.
  if (std::string_view(Py_TYPE(v.ptr())->tp_name).starts_with("numpy.bool"))
    return PyObject_IsTrue(v.ptr()) == 1;
  wrong_type(s, p, "a bool", v);
}

std::string str_arg(const Signature& s, const Param& p, py::handle v) {
  if (!py::isinstance<py::str>(v)) wrong_type(s, p, "a str", v);
  return v.cast<std::string>();
}

ArgValue to_arg(const Signature& s, const Param& p, py::handle v) {
  if (v.is_none()) {
    if (p.optional) return std::monostate{};
    if (p.type == ParamType::Tensor || p.type == ParamType::Operand) tensor_expected(s, p, v);
    wrong_type(s, p, "not None", v);
  }
  switch (p.type) {
    case ParamType::Tensor:
      if (!is_tensor_like(v)) tensor_expected(s, p, v);
      return as_tensor_arg(v);
    case ParamType::Operand:
      if (is_tensor_like(v)) return as_tensor_arg(v);
      if (PySequence_Check(v.ptr())) tensor_expected(s, p, v);
      return number_arg(s, p, v);
    case ParamType::Tensors: {
      if (!PySequence_Check(v.ptr()) || is_tensor_like(v))
        wrong_type(s, p, "a sequence of tensors", v);
      std::vector<Tensor> out;
      for (py::handle item : py::reinterpret_borrow<py::sequence>(v)) {
        if (!is_tensor_like(item)) tensor_expected(s, p, item);
        out.push_back(as_tensor_arg(item));
      }
      return out;
    }
    case ParamType::Int:
      return int_arg(s, p, v);
    case ParamType::Float:
      return number_arg(s, p, v);
    case ParamType::Bool:
      return bool_arg(s, p, v);
    case ParamType::Str:
      return str_arg(s, p, v);
    case ParamType::Ints:
      return ints_arg(s, p, v);
    case ParamType::DType:
      return to_dtype(v);
    case ParamType::Device:
      return to_device(v);
    case ParamType::Generator:
      if (!py::isinstance<Generator>(v)) wrong_type(s, p, "an encore.Generator", v);
      return &v.cast<Generator&>();
    case ParamType::Padding:
      if (py::isinstance<py::str>(v)) return v.cast<std::string>();
      if (PyIndex_Check(v.ptr())) return int_arg(s, p, v);
      if (PySequence_Check(v.ptr())) {
        std::vector<int64_t> pair = ints_arg(s, p, v);
        if (pair.size() == 2) return pair;
      }
      wrong_type(s, p, "a str, an int or a (left, right) pair", v);
    case ParamType::Object: {
      // A layer (the only objects signatures name): an instance of the encore.nn class named.
      const py::object cls = py::module_::import("encore._C").attr(p.object_type.c_str());
      if (!py::isinstance(v, cls)) wrong_type(s, p, ("an encore.nn." + p.object_type).c_str(), v);
      return std::static_pointer_cast<void>(v.cast<std::shared_ptr<nn::Module>>());
    }
  }
  wrong_type(s, p, "?", v);
}

}  // namespace

CallArgs bind_call(const Signature& s, py::handle self, const py::args& args,
                   const py::kwargs& kwargs) {
  const size_t n = s.params.size();
  std::vector<ArgValue> values(n);
  std::vector<bool> given(n, false);
  std::vector<py::handle> positional;
  positional.reserve(args.size() + 1);
  if (self) positional.push_back(self);
  for (py::handle a : args) positional.push_back(a);

  size_t next = 0;
  for (size_t i = 0; i < positional.size();) {
    if (next == n || s.params[next].keyword_only) {
      size_t max = 0;
      for (const Param& p : s.params) max += !p.keyword_only && !p.varargs;
      throw py::type_error(detail::cat("[", s.name, "] takes at most ", max - (self ? 1 : 0),
                                       " positional arguments, got ",
                                       positional.size() - (self ? 1 : 0)));
    }
    const Param& p = s.params[next];
    if (p.varargs) {
      const size_t rest = positional.size() - i;
      if (rest == 1 && !PyIndex_Check(positional[i].ptr())) {
        values[next] = ints_arg(s, p, positional[i]);
      } else {
        std::vector<int64_t> items;
        for (; i < positional.size(); ++i) {
          if (!PyIndex_Check(positional[i].ptr()) || PyBool_Check(positional[i].ptr()))
            throw py::type_error(detail::cat("[", s.name, "] ", p.name,
                                             " entries must be ints, got ",
                                             type_name(positional[i])));
          items.push_back(int_arg(s, p, positional[i]));
        }
        values[next] = std::move(items);
      }
      given[next++] = true;
      break;
    }
    values[next] = to_arg(s, p, positional[i++]);
    given[next++] = true;
  }
  for (auto [key, value] : kwargs) {
    const std::string name = py::str(key);
    const int i = s.index_of(name);
    if (i < 0)
      throw py::type_error(
          detail::cat("[", s.name, "] got an unexpected keyword argument '", name, "'"));
    if (given[i])
      throw py::type_error(
          detail::cat("[", s.name, "] got multiple values for argument '", name, "'"));
    const Param& p = s.params[i];
    values[i] = p.varargs ? ArgValue(ints_arg(s, p, value)) : to_arg(s, p, value);
    given[i] = true;
  }
  for (size_t i = 0; i < n; ++i) {
    if (given[i]) continue;
    const Param& p = s.params[i];
    if (p.default_value)
      values[i] = *p.default_value;
    else if (p.varargs)
      values[i] = std::vector<int64_t>{};
    else
      throw py::type_error(detail::cat("[", s.name, "] missing required argument '", p.name, "'"));
    // Defaults are literals ("float32", "cpu"): the types the op reads.
    values[i] = check_arg(s, p, std::move(values[i]));
  }
  return CallArgs(s, std::move(values));
}

}  // namespace encore::python
