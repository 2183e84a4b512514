// Writes what the Python package knows of the op and layer rows, from their signatures:
//  - encore/_C.pyi: the hand-written template (_C.pyi.in) with the stubs of every public op
//    function and of the Tensor methods rows ask for, and the __init__ of every layer class.
//    The template marks the places with a line "# @generated functions", an indented line
//    "# @generated Tensor methods" and a line "# @generated layers". A layer class the template
//    declares (for what the layer adds: properties, methods, another base) gets its __init__
//    right after its class line; the other layers' classes are written at the layers marker.
//  - encore/_ops.py: imports every op function from _C and lists them in __all__, so that
//    `encore/__init__.py` re-exports them and type checkers see them.
//
//   encore_stubgen <template> <_C.pyi> <_ops.py>
//
// A file is rewritten only when its text changes.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "nn/layer.h"
#include "ops/registry.h"

namespace {

using encore::OpDef;
using encore::Param;
using encore::ParamType;
using encore::Signature;

// The stub spelling of a parameter type (the aliases the template defines: TensorLike, ...).
std::string stub_type(const Param& p) {
  std::string t;
  switch (p.type) {
    case ParamType::Tensor:
      t = "TensorLike";
      break;
    case ParamType::Operand:
      t = "Union[TensorLike, Number]";
      break;
    case ParamType::Tensors:
      t = "Sequence[TensorLike]";
      break;
    case ParamType::Int:
      t = p.varargs ? "Union[_int, Sequence[_int]]" : "_int";
      break;
    case ParamType::Float:
      t = "_float";
      break;
    case ParamType::Bool:
      t = "bool";
      break;
    case ParamType::Str:
      t = "str";
      break;
    case ParamType::Ints:
      t = "Union[_int, Sequence[_int]]";
      break;
    case ParamType::DType:
      t = "DTypeLike";
      break;
    case ParamType::Device:
      t = "DeviceLike";
      break;
    case ParamType::Generator:
      t = "Generator";
      break;
    case ParamType::Padding:
      t = "Union[str, _int, Tuple[_int, _int]]";
      break;
    case ParamType::Object:
      t = p.object_type;
      break;
  }
  return p.optional ? "Optional[" + t + "]" : t;
}

std::string stub_return(const std::string& r) {
  if (r.empty() || r == "None") return "None";
  if (r.starts_with("tuple[")) return "Tuple[" + r.substr(6);
  return r;
}

// The parameters of a stub. `self_first`: `self` replaces the first parameter (a method);
// `self_added`: `self` comes before them (a layer's __init__).
std::string stub_params(const Signature& s, bool self_first, bool self_added) {
  std::string line = self_added ? "self" : "";
  bool star = false;
  for (size_t i = 0; i < s.params.size(); ++i) {
    const Param& p = s.params[i];
    if (i || self_added) line += ", ";
    if (self_first && i == 0) {
      line += "self";
      continue;
    }
    if (p.keyword_only && !star && !p.varargs) {
      line += "*, ";
      star = true;
    }
    if (p.varargs) star = true;
    line += (p.varargs ? "*" : "") + p.name + ": " + stub_type(p);
    if (p.default_value) line += " = " + p.default_text;
  }
  return line;
}

// "def name(params) -> R: ..." with `self` for the first parameter of a method.
std::string stub(const Signature& s, bool method) {
  return "def " + s.name + "(" + stub_params(s, method, false) + ") -> " + stub_return(s.returns) +
         ": ...";
}

std::string init_stub(const encore::nn::LayerDef& def) {
  return "def __init__(" + stub_params(encore::nn::layer_signature(def), false, true) +
         ") -> None: ...";
}

// The layer row a template line "class Name(Base):" declares, or null.
const encore::nn::LayerDef* layer_class(const std::string& line) {
  if (!line.starts_with("class ")) return nullptr;
  const std::string name = line.substr(6, line.find_first_of("(:") - 6);
  for (const encore::nn::LayerDef* def : encore::nn::all_layers())
    if (name == def->name) return def;
  return nullptr;
}

// The rows with a public function, by name.
std::vector<const OpDef*> public_ops() {
  std::vector<const OpDef*> ops;
  for (const OpDef* def : encore::all_ops())
    if (def->signature) ops.push_back(def);
  std::sort(ops.begin(), ops.end(),
            [](const OpDef* a, const OpDef* b) { return std::string_view(a->name) < b->name; });
  return ops;
}

// Writes `text` to `path` unless it already holds it.
void write_if_changed(const char* path, const std::string& text) {
  std::ifstream previous(path);
  std::ostringstream old;
  old << previous.rdbuf();
  if (previous && old.str() == text) return;
  // A build folder configured before the stubs were generated links _C.pyi to the source tree.
  if (std::filesystem::is_symlink(path)) std::filesystem::remove(path);
  std::ofstream(path) << text;
}

std::string ops_module() {
  std::string imports, names;
  for (const OpDef* def : public_ops()) {
    imports += std::string("    ") + def->name + ",\n";
    names += std::string("    \"") + def->name + "\",\n";
  }
  return "\"\"\"The op functions of encore (generated by encore_stubgen from the op "
         "rows).\"\"\"\n\n"
         "from ._C import (  # noqa: F401\n" +
         imports + ")\n\n__all__ = [\n" + names + "]\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: encore_stubgen <template> <_C.pyi> <_ops.py>\n";
    return 2;
  }
  std::ifstream in(argv[1]);
  if (!in) {
    std::cerr << "encore_stubgen: cannot read " << argv[1] << "\n";
    return 1;
  }
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::set<std::string> declared;
  for (const std::string& line : lines)
    if (const encore::nn::LayerDef* def = layer_class(line)) declared.insert(def->name);
  std::ostringstream out;
  int markers = 0;
  const encore::nn::LayerDef* in_layer = nullptr;
  for (const std::string& line : lines) {
    const size_t indent = line.find_first_not_of(' ');
    const std::string body = indent == std::string::npos ? "" : line.substr(indent);
    const bool functions = body == "# @generated functions",
               methods = body == "# @generated Tensor methods";
    if (indent == 0) in_layer = layer_class(line);
    if (in_layer && body.starts_with("def __init__(")) {
      std::cerr << "encore_stubgen: " << argv[1] << " declares " << in_layer->name
                << ".__init__, which comes from its layer row\n";
      return 1;
    }
    if (body == "# @generated layers") {
      ++markers;
      for (const encore::nn::LayerDef* def : encore::nn::all_layers())
        if (!declared.count(def->name))
          out << "class " << def->name << "(Module):\n    " << init_stub(*def) << "\n\n";
      continue;
    }
    if (!functions && !methods) {
      out << line << "\n";
      if (indent == 0 && layer_class(line)) out << "    " << init_stub(*layer_class(line)) << "\n";
      continue;
    }
    ++markers;
    for (const OpDef* def : public_ops()) {
      if (methods && !def->method) continue;
      out << line.substr(0, indent) << stub(encore::signature_of(*def), methods) << "\n";
    }
  }
  if (markers != 3) {
    std::cerr << "encore_stubgen: " << argv[1] << " needs the three '# @generated' markers\n";
    return 1;
  }
  write_if_changed(argv[2], out.str());
  write_if_changed(argv[3], ops_module());
  return 0;
}
