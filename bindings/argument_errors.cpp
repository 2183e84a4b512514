// Short TypeErrors for calls whose arguments match no overload. pybind11's own message ends with
// the repr of every argument: a list of a million numbers passed where a tensor is expected made
// a message of megabytes. Every function of encore._C is routed through a wrapper of pybind11's
// dispatcher that rewrites that message to
//   [matmul] expected a Tensor or NumPy array for argument 'b', got list (convert with
//   encore.tensor(...))
// or, for other mismatches, to the argument types and the accepted signatures. The wrapper costs
// one indirect call; the rewrite runs only on the error path. pybind11's message is parsed, and an
// unexpected format leaves it as it was.
#include <string_view>
#include <unordered_map>

#include "bindings.h"

namespace encore::python {

namespace {

using FastCall = PyObject* (*)(PyObject*, PyObject* const*, Py_ssize_t, PyObject*);
FastCall g_pybind11_dispatcher = nullptr;
std::string g_tensor_type;  // as pybind11 writes it in signatures: "encore._C.Tensor"

struct Param {
  std::string name, type;
  bool keyword_only;
};

// "(a: T, b: U = 1, *, c: V) -> R" -> its parameters ("*" and "/" markers are dropped).
std::vector<Param> parse_params(std::string_view sig) {
  std::vector<Param> out;
  const size_t open = sig.find('(');
  if (open == std::string_view::npos) return out;
  bool keyword_only = false;
  int depth = 0;
  size_t start = open + 1;
  for (size_t i = open + 1; i < sig.size() && depth >= 0; ++i) {
    const char c = sig[i];
    if (c == '(' || c == '[') ++depth;
    if (c == ')' || c == ']') --depth;
    if (!((c == ',' && depth == 0) || depth < 0)) continue;
    std::string_view p = sig.substr(start, i - start);
    while (!p.empty() && p.front() == ' ') p.remove_prefix(1);
    start = i + 1;
    if (p.empty() || p == "/") continue;
    if (p.front() == '*') {  // "*", "*args" or "**kwargs": what follows is keyword-only
      keyword_only = true;
      continue;
    }
    const size_t colon = p.find(": ");
    std::string_view type = colon == std::string_view::npos ? "" : p.substr(colon + 2);
    type = type.substr(0, type.find(" = "));
    out.push_back({std::string(p.substr(0, colon)), std::string(type), keyword_only});
  }
  return out;
}

// Signatures and type names as a user writes them: "Tensor", "int".
std::string readable(std::string s) {
  static const std::pair<std::string_view, std::string_view> kNames[] = {
      {"typing.SupportsInt | typing.SupportsIndex", "int"},
      {"typing.SupportsFloat | typing.SupportsIndex", "float"},
      {"encore._C.", ""},
      {"typing.", ""}};
  for (const auto& [from, to] : kNames)
    for (size_t at; (at = s.find(from)) != std::string::npos;) s.replace(at, from.size(), to);
  return s;
}

// Whether `value` can bind to a parameter of `type` that takes a Tensor.
bool tensor_param_rejects(const std::string& type, py::handle value) {
  if (type.find(g_tensor_type) == std::string::npos) return false;
  const bool plain = type == g_tensor_type;
  const bool optional = type.find("None") != std::string::npos;
  if (!plain && !optional) return false;  // a container of tensors: not this message
  if (optional && value.is_none()) return false;
  return !py::isinstance<Tensor>(value) && !py::isinstance<py::array>(value);
}

// "[matmul] expected a Tensor or NumPy array for argument 'b', got list (convert with ...)".
std::string tensor_expected(const std::string& name, const std::string& which, py::handle value) {
  const std::string got = value.is_none() ? "None"
                                          : readable(Py_TYPE(value.ptr())->tp_name) +
                                                " (convert with encore.tensor(...))";
  return "[" + name + "] expected a Tensor or NumPy array" + which + ", got " + got;
}

// The rewritten message, or "" to keep pybind11's. `property` names the attribute when the
// function is a property's setter (pybind11 gives those no name).
std::string short_message(const std::string& msg, const std::string* property,
                          PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  const size_t colon = msg.find("(): incompatible ");
  const size_t list = msg.find("supported:\n");
  const size_t end = msg.find("\nInvoked with:");
  if (colon == std::string::npos || list == std::string::npos || end == std::string::npos ||
      end < list)
    return "";
  std::vector<std::string> signatures;
  std::string_view lines = std::string_view(msg).substr(list + 11, end - list - 11);
  while (!lines.empty()) {
    std::string_view line = lines.substr(0, lines.find('\n'));
    lines.remove_prefix(std::min(lines.size(), line.size() + 1));
    const size_t dot = line.find(". ");
    if (dot != std::string_view::npos) signatures.emplace_back(line.substr(dot + 2));
  }
  if (signatures.empty()) return "";

  if (property && nargs == 2) {  // obj.attr = value: the value binds to the last parameter
    std::string expected;
    for (const std::string& sig : signatures) {
      const std::vector<Param> params = parse_params(sig);
      if (params.empty()) return "";
      if (tensor_param_rejects(params.back().type, args[1]))
        return tensor_expected(*property, "", args[1]);
      expected += (expected.empty() ? "" : " or ") + params.back().type;
    }
    return "[" + *property + "] cannot be set to a value of type " +
           readable(Py_TYPE(args[1])->tp_name) + "; expected " + readable(expected);
  }

  // A constructor's first argument is the new object; its signatures omit it and are written
  // "encore._C.Dense(units: ...)": the class names the error.
  const bool constructor =
      std::string_view(msg).substr(colon).starts_with("(): incompatible constructor");
  const Py_ssize_t first = constructor ? 1 : 0;
  const std::string name = constructor ? readable(signatures[0].substr(0, signatures[0].find('(')))
                                       : msg.substr(0, colon);
  const Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;

  for (const std::string& sig : signatures) {
    const std::vector<Param> params = parse_params(sig);
    const bool method = !params.empty() && params[0].name == "self";
    // Parameters pybind11 named itself ("arg0") are given by position, counted without self.
    auto argument = [&](size_t index) {
      const std::string& p = params[index].name;
      const bool unnamed =
          p.starts_with("arg") && p.find_first_not_of("0123456789", 3) == std::string::npos;
      return " for argument " + (unnamed ? std::to_string(index + 1 - method) : "'" + p + "'");
    };
    size_t positional = 0;
    for (Py_ssize_t i = first; i < nargs && positional < params.size(); ++i, ++positional) {
      if (params[positional].keyword_only) break;
      if (tensor_param_rejects(params[positional].type, args[i]))
        return tensor_expected(name, argument(positional), args[i]);
    }
    for (Py_ssize_t k = 0; k < nkw; ++k) {
      const std::string key = py::str(PyTuple_GET_ITEM(kwnames, k));
      for (size_t j = 0; j < params.size(); ++j)
        if (params[j].name == key && tensor_param_rejects(params[j].type, args[nargs + k]))
          return tensor_expected(name, argument(j), args[nargs + k]);
    }
  }

  // Any other mismatch: the types given and the signatures accepted, never the values.
  std::string given;
  constexpr Py_ssize_t kMaxShown = 12;
  for (Py_ssize_t i = first; i < nargs + nkw; ++i) {
    if (i - first == kMaxShown) {
      given += ", ...";
      break;
    }
    if (i > first) given += ", ";
    if (i >= nargs) given += std::string(py::str(PyTuple_GET_ITEM(kwnames, i - nargs))) + "=";
    given += readable(Py_TYPE(args[i])->tp_name);
  }
  std::string accepted;
  for (const std::string& sig : signatures) accepted += (accepted.empty() ? "" : " or ") + sig;
  return "[" + name + "] incompatible arguments (" + given + "); expected " + readable(accepted);
}

// Property setters by their function record (the `self` of the function object).
std::unordered_map<PyObject*, std::string> g_setters;

void shorten_argument_error(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                            PyObject* kwnames) {
  if (!PyErr_ExceptionMatches(PyExc_TypeError)) return;
  py::error_already_set error;  // fetched; restored below unless it is replaced
  std::string message;
  if (error.type().ptr() == PyExc_TypeError) {
    const auto setter = g_setters.find(self);
    try {
      message = short_message(py::str(error.value()),
                              setter == g_setters.end() ? nullptr : &setter->second, args, nargs,
                              kwnames);
    } catch (const std::exception&) {
      message.clear();
      PyErr_Clear();
    }
  }
  if (message.empty()) {
    error.restore();
    return;
  }
  PyErr_SetString(PyExc_TypeError, message.c_str());
}

PyObject* dispatch(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  PyObject* result = g_pybind11_dispatcher(self, args, nargs, kwnames);
  if (!result) shorten_argument_error(self, args, nargs, kwnames);
  return result;
}

// Routes one pybind11 function (possibly wrapped as a method, static method or property) that
// its scope calls `name`.
void route(py::handle f, const std::string& name) {
  if (!f) return;
  if (PyInstanceMethod_Check(f.ptr())) return route(PyInstanceMethod_GET_FUNCTION(f.ptr()), name);
  if (py::isinstance<py::staticmethod>(f)) return route(f.attr("__func__"), name);
  if (PyObject_TypeCheck(f.ptr(), &PyProperty_Type)) {
    route(f.attr("fget"), name);
    py::object setter = f.attr("fset");
    if (PyCFunction_Check(setter.ptr())) g_setters[PyCFunction_GET_SELF(setter.ptr())] = name;
    route(setter, name);
    return;
  }
  if (!PyCFunction_Check(f.ptr())) return;
  PyMethodDef* def = reinterpret_cast<PyCFunctionObject*>(f.ptr())->m_ml;
  if (reinterpret_cast<FastCall>(reinterpret_cast<void (*)()>(def->ml_meth)) ==
      g_pybind11_dispatcher)
    def->ml_meth = reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&dispatch));
}

}  // namespace

void init_argument_errors(py::module_& m) {
  const py::object sample = m.attr("matmul");
  g_pybind11_dispatcher = reinterpret_cast<FastCall>(reinterpret_cast<void (*)()>(
      reinterpret_cast<PyCFunctionObject*>(sample.ptr())->m_ml->ml_meth));
  py::object tensor = py::type::of<Tensor>();
  g_tensor_type = py::str(tensor.attr("__module__")).cast<std::string>() + "." +
                  tensor.attr("__qualname__").cast<std::string>();
  for (auto [key, value] : m.attr("__dict__").cast<py::dict>()) {
    route(value, py::str(key));
    if (!PyType_Check(value.ptr())) continue;
    for (py::handle item : value.attr("__dict__").attr("items")()) {
      const auto member = py::reinterpret_borrow<py::tuple>(item);
      route(member[1], py::str(member[0]));
    }
  }
}

}  // namespace encore::python
