// The C++ API against the op rows. Python binds each op from its row's signature and its stub is
// generated from it, but the C++ functions of ops/ops.h and ops/collective.h (and the Tensor
// methods that stand for a row) are written by hand: this test reads those headers and requires
// every declaration with a row to take the row's parameters, with the same names, in the same
// order, of matching types and with the same defaults, and every public row to have its C++
// function. A change to either side that the other does not follow fails here, in every build
// (no Python needed).
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "core/modes.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace encore {
namespace {

struct CppParam {
  std::string type, name, default_text;
};
struct CppDecl {
  std::string returns, name, scope;  // scope: the class a method belongs to, else empty
  std::vector<CppParam> params;
  bool is_static = false;
};

std::string read(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot read " << path;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string trim(std::string s) {
  const auto space = [](unsigned char c) { return std::isspace(c) != 0; };
  while (!s.empty() && space(s.back())) s.pop_back();
  size_t i = 0;
  while (i < s.size() && space(s[i])) ++i;
  return s.substr(i);
}

// Without comments and preprocessor lines, whitespace runs as one space.
std::string code_of(const std::string& text) {
  std::string out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (const size_t c = line.find("//"); c != std::string::npos) line.resize(c);
    if (trim(line).starts_with("#")) continue;
    out += line + " ";
  }
  std::string squeezed;
  for (char c : out)
    if (!(std::isspace(static_cast<unsigned char>(c)) && !squeezed.empty() &&
          squeezed.back() == ' '))
      squeezed += std::isspace(static_cast<unsigned char>(c)) ? ' ' : c;
  return squeezed;
}

// Splits at `sep` outside (), {}, <> and quotes.
std::vector<std::string> split_top(const std::string& s, char sep) {
  std::vector<std::string> parts;
  int depth = 0;
  bool quoted = false;
  std::string cur;
  for (char c : s) {
    if (c == '"') quoted = !quoted;
    if (!quoted) {
      if (c == '(' || c == '{' || c == '<') ++depth;
      if (c == ')' || c == '}' || c == '>') --depth;
      if (c == sep && depth == 0) {
        parts.push_back(trim(cur));
        cur.clear();
        continue;
      }
    }
    cur += c;
  }
  if (!trim(cur).empty()) parts.push_back(trim(cur));
  return parts;
}

CppParam parse_param(const std::string& text) {
  CppParam p;
  const std::vector<std::string> sides = split_top(text, '=');
  const std::string& decl = sides[0];
  size_t end = decl.size();
  while (end > 0 &&
         (std::isalnum(static_cast<unsigned char>(decl[end - 1])) || decl[end - 1] == '_'))
    --end;
  p.name = decl.substr(end);
  p.type = trim(decl.substr(0, end));
  if (sides.size() > 1) p.default_text = sides[1];
  return p;
}

// The function declarations of a header: at namespace scope, or in a class (scope = its name).
// Function bodies, operators and templates are skipped.
std::vector<CppDecl> parse_declarations(const std::string& text) {
  const std::string code = code_of(text);
  std::vector<CppDecl> decls;
  std::vector<std::string> scopes;  // "namespace", "class X", "body" per open brace
  std::string stmt;
  int parens = 0;
  const auto in_body = [&] {
    return std::find(scopes.begin(), scopes.end(), "body") != scopes.end();
  };
  const auto declaration = [&](std::string s) {
    s = trim(s);
    const size_t open = s.find('(');
    if (in_body() || open == std::string::npos || s.starts_with("template") ||
        s.find("operator") != std::string::npos || s.starts_with("using") ||
        s.starts_with("return") || s.starts_with("friend"))
      return;
    int depth = 0;
    size_t close = open;
    for (; close < s.size(); ++close) {
      if (s[close] == '(') ++depth;
      if (s[close] == ')' && --depth == 0) break;
    }
    CppParam head = parse_param(s.substr(0, open));
    if (head.name.empty() || head.type.empty()) return;  // a constructor call, a macro
    CppDecl d;
    d.name = head.name;
    d.returns = head.type;
    d.is_static = d.returns.starts_with("static ");
    for (const char* word : {"static ", "inline ", "explicit ", "virtual "})
      if (d.returns.starts_with(word)) d.returns = trim(d.returns.substr(std::string(word).size()));
    for (auto it = scopes.rbegin(); it != scopes.rend(); ++it)
      if (it->starts_with("class ") || it->starts_with("struct ")) {
        d.scope = it->substr(it->find(' ') + 1);
        break;
      }
    const std::string params = s.substr(open + 1, close - open - 1);
    if (trim(params) != "void")
      for (const std::string& p : split_top(params, ',')) d.params.push_back(parse_param(p));
    decls.push_back(std::move(d));
  };
  for (char c : code) {
    if (c == '(') ++parens;
    if (c == ')') --parens;
    if (parens > 0 || (c != ';' && c != '{' && c != '}')) {
      stmt += c;
      continue;
    }
    if (c == ';') {
      declaration(stmt);
    } else if (c == '{') {
      const std::string head = trim(stmt);
      if (head.find('(') != std::string::npos || head.find('=') != std::string::npos ||
          head.empty() || in_body()) {
        if (!in_body()) declaration(head);  // an inline definition declares too
        scopes.push_back("body");
      } else if (head.starts_with("namespace")) {
        scopes.push_back("namespace");
      } else {
        // "class Tensor : public X" -> "class Tensor"
        std::istringstream words(head);
        std::string kind, name;
        words >> kind >> name;
        scopes.push_back(kind + " " + name);
      }
    } else if (!scopes.empty()) {
      scopes.pop_back();
    }
    stmt.clear();
  }
  return decls;
}

std::string normalized_type(std::string t) {
  for (const std::string drop : {"const ", "&"})
    for (size_t i; (i = t.find(drop)) != std::string::npos;) t.erase(i, drop.size());
  std::string out;
  for (char c : t)
    if (c != ' ') out += c;
  return out;
}

bool type_matches(const Param& p, std::string t, bool defaults_to_empty) {
  t = normalized_type(t);
  if (p.optional) {
    if (t.starts_with("std::optional<") && t.ends_with(">")) {
      Param inner = p;
      inner.optional = false;
      return type_matches(inner, t.substr(14, t.size() - 15), false);
    }
    // An undefined tensor, an empty list or a null pointer stands for None.
    if (!defaults_to_empty && p.default_value) return false;
  }
  switch (p.type) {
    case ParamType::Tensor:
      return t == "Tensor";
    case ParamType::Operand:
      return t == "Tensor" || t == "Scalar";
    case ParamType::Tensors:
      return t == "std::vector<Tensor>";
    case ParamType::Int:
      return p.varargs ? t == "Shape" : t == "int64_t" || t == "int";
    case ParamType::Float:
      return t == "double" || t == "Scalar";
    case ParamType::Bool:
      return t == "bool";
    case ParamType::Str:
      return t == "std::string" || t == "Activation" || t == "Padding" || t == "ReduceOp" ||
             t == "dist::ReduceOp";
    case ParamType::Ints:
      return t == "std::vector<int64_t>" || t == "Shape";
    case ParamType::DType:
      return t == "DType";
    case ParamType::Device:
      return t == "Device";
    case ParamType::Generator:
      return t == "Generator*";
    case ParamType::Padding:
      return t == "Padding";
    case ParamType::Object:
      return false;  // layer rows only
  }
  return false;
}

// "HardSigmoid" -> "hard_sigmoid"
std::string snake(const std::string& camel) {
  std::string out;
  for (char c : camel) {
    if (std::isupper(static_cast<unsigned char>(c)) && !out.empty()) out += '_';
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

bool default_matches(const Param& p, const std::string& cpp) {
  if (!p.default_value) return cpp.empty();
  if (cpp.empty()) return false;
  const ArgValue& v = *p.default_value;
  if (std::holds_alternative<std::monostate>(v))
    return cpp == "{}" || cpp == "std::nullopt" || cpp == "nullptr";
  if (const bool* b = std::get_if<bool>(&v)) return cpp == (*b ? "true" : "false");
  if (const std::string* s = std::get_if<std::string>(&v)) {
    if (cpp == "\"" + *s + "\"") return true;
    if (cpp.starts_with("Activation::")) return snake(cpp.substr(12)) == *s;
    if (cpp.starts_with("ReduceOp::")) return snake(cpp.substr(10)) == *s;
    if (cpp.starts_with("Padding::")) return cpp == "Padding::" + *s + "()";
    return false;
  }
  double number = 0;
  if (const int64_t* i = std::get_if<int64_t>(&v))
    number = static_cast<double>(*i);
  else if (const double* d = std::get_if<double>(&v))
    number = *d;
  else
    return false;
  char* end = nullptr;
  const double value = std::strtod(cpp.c_str(), &end);
  return end && *end == '\0' && value == number;
}

bool returns_match(const std::string& python, const std::string& cpp) {
  const std::string t = normalized_type(cpp);
  if (python == "Tensor") return t == "Tensor";
  if (python == "tuple[Tensor, Tensor]") return t == "std::pair<Tensor,Tensor>";
  if (python == "tuple[Tensor, ...]") return t == "std::vector<Tensor>";
  if (python == "None") return t == "void";
  return false;
}

// What differs between a C++ declaration and the row's signature (empty: nothing). A method
// stands for a row whose first parameter is the tensor it is called on. A convenience overload
// (`spelling`: all_reduce's std::string beside its ReduceOp) may leave out defaults, never
// differ in one.
std::string differences(const Signature& s, const CppDecl& d, bool spelling = false) {
  std::ostringstream out;
  const size_t first = d.scope.empty() ? 0 : 1;
  const size_t n = s.params.size() - std::min(first, s.params.size());
  if (!returns_match(s.returns, d.returns))
    out << " returns " << d.returns << " (Python: " << s.returns << ");";
  if (d.params.size() != n)
    out << " takes " << d.params.size() << " parameters (Python: " << n << ");";
  for (size_t i = 0; i < std::min(n, d.params.size()); ++i) {
    const Param& p = s.params[first + i];
    const CppParam& c = d.params[i];
    const bool empty_default = c.default_text == "{}" || c.default_text == "nullptr";
    if (c.name != p.name)
      out << " parameter " << i + first << " is '" << c.name << "' (Python: '" << p.name << "');";
    if (!type_matches(p, c.type, empty_default))
      out << " '" << p.name << "' has type " << c.type
          << " (Python: " << Signature{"", {p}, ""}.str() << ");";
    if (!default_matches(p, c.default_text) && !(spelling && c.default_text.empty()))
      out << " '" << p.name << "' defaults to "
          << (c.default_text.empty() ? "nothing" : c.default_text)
          << " (Python: " << (p.default_value ? p.default_text : "nothing") << ");";
  }
  return out.str();
}

std::string source(const char* path) { return read(std::string(ENCORE_SOURCE_DIR) + "/" + path); }

// The headers whose functions and Tensor methods stand for rows.
std::vector<CppDecl> cpp_api() {
  std::vector<CppDecl> decls;
  for (const char* header : {"ops/ops.h", "ops/collective.h", "ops/tensor.h"})
    for (CppDecl& d : parse_declarations(source(header)))
      if (d.scope.empty() ? std::string(header) != "ops/tensor.h"
                          : d.scope == "Tensor" && !d.is_static)
        decls.push_back(std::move(d));
  return decls;
}

TEST(CppSignatures, ParserReadsDeclarations) {
  const std::vector<CppDecl> d = parse_declarations(
      "// a comment (with parens)\n#include <x>\nnamespace encore {\nclass G;\n"
      "/// doc\nTensor f(const Tensor& x, std::optional<int64_t> s = std::nullopt, Padding p = "
      "{},\n"
      "         std::pair<int, int> q = {1, 2});\n"
      "template <class T> Tensor g(T x);\nTensor operator+(const Tensor& a, Scalar b);\n"
      "class Tensor {\n public:\n  Tensor h(int64_t axis = 0) const { return call(x, {a}); }\n"
      "  static Tensor empty(const Shape& shape);\n};\n}  // namespace encore\n");
  ASSERT_EQ(d.size(), 3u);
  EXPECT_TRUE(d[2].is_static);
  EXPECT_EQ(d[0].name, "f");
  EXPECT_EQ(d[0].returns, "Tensor");
  ASSERT_EQ(d[0].params.size(), 4u);
  EXPECT_EQ(d[0].params[1].type, "std::optional<int64_t>");
  EXPECT_EQ(d[0].params[1].default_text, "std::nullopt");
  EXPECT_EQ(d[0].params[2].default_text, "{}");
  EXPECT_EQ(d[0].params[3].type, "std::pair<int, int>");
  EXPECT_EQ(d[1].name, "h");
  EXPECT_EQ(d[1].scope, "Tensor");
  EXPECT_EQ(d[1].params[0].default_text, "0");
  EXPECT_EQ(d[2].name, "empty");
}

TEST(CppSignatures, ComparisonFindsDrift) {
  const Signature s =
      Signature::parse("f(x: Tensor, axis: int = 0, gen: Generator | None = None) -> Tensor");
  const CppDecl same = parse_declarations(
      "Tensor f(const Tensor& x, int64_t axis = 0, Generator* gen = nullptr);")[0];
  EXPECT_EQ(differences(s, same), "");
  const CppDecl renamed = parse_declarations(
      "Tensor f(const Tensor& x, int64_t dim = 0, Generator* gen = nullptr);")[0];
  EXPECT_NE(differences(s, renamed).find("'dim'"), std::string::npos);
  const CppDecl no_default =
      parse_declarations("Tensor f(const Tensor& x, int64_t axis, Generator* gen = nullptr);")[0];
  EXPECT_NE(differences(s, no_default).find("defaults to nothing"), std::string::npos);
  EXPECT_EQ(differences(s, no_default, /*spelling=*/true), "");  // beside an exact overload
  const CppDecl other_default = parse_declarations(
      "Tensor f(const Tensor& x, int64_t axis = 1, Generator* gen = nullptr);")[0];
  EXPECT_NE(differences(s, other_default, /*spelling=*/true).find("defaults to 1"),
            std::string::npos);
  const CppDecl other_type = parse_declarations(
      "Tensor f(const Tensor& x, double axis = 0, Generator* gen = nullptr);")[0];
  EXPECT_NE(differences(s, other_type).find("has type double"), std::string::npos);
}

// A Tensor | float parameter is two overloads in C++: one takes a Tensor, one a Scalar.
TEST(CppSignatures, EveryRowMatchesItsCppFunction) {
  std::map<std::string, std::vector<const CppDecl*>> by_name;
  const std::vector<CppDecl> api = cpp_api();
  for (const CppDecl& d : api) by_name[d.name].push_back(&d);
  for (const OpDef* def : all_ops()) {
    if (!def->signature) continue;
    const Signature& s = signature_of(*def);
    const auto it = by_name.find(s.name);
    if (it == by_name.end()) {
      ADD_FAILURE() << s.name << " has a row (Python: " << s.str()
                    << ") but no C++ function in ops/ops.h "
                    << "nor Tensor method";
      continue;
    }
    std::set<std::string> operand_kinds;
    const bool one_exact = std::any_of(it->second.begin(), it->second.end(), [&](const CppDecl* d) {
      return differences(s, *d).empty();
    });
    for (const CppDecl* d : it->second) {
      EXPECT_EQ(differences(s, *d, one_exact), "")
          << s.name << ": C++ " << (d->scope.empty() ? "" : "Tensor::") << d->name
          << " differs from Python " << s.str();
      for (size_t i = 0; i < d->params.size(); ++i)
        if (const int p = static_cast<int>(i + (d->scope.empty() ? 0 : 1));
            p < static_cast<int>(s.params.size()) && s.params[p].type == ParamType::Operand)
          operand_kinds.insert(normalized_type(d->params[i].type));
    }
    const bool has_operand = std::any_of(s.params.begin(), s.params.end(), [](const Param& p) {
      return p.type == ParamType::Operand;
    });
    if (has_operand) {
      EXPECT_EQ(operand_kinds, (std::set<std::string>{"Scalar", "Tensor"}))
          << s.name << " takes a Tensor or a number in Python: C++ needs an overload for each";
    }
  }
}

// What the C++ side gained where it differed: Python's defaults and meanings.
TEST(CppSignatures, CppCallsMeanWhatPythonCallsMean) {
  EXPECT_EQ(arange(0, 5).dtype(), DType::Int64);  // integer bounds: int64, as NumPy and Python
  EXPECT_EQ(arange(0, 2.5).dtype(), DType::Float32);
  EXPECT_EQ(arange(3).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2}));  // arange(stop)
  const Tensor a = ones({2, 3}), b = zeros({1, 3});
  EXPECT_EQ(concat({a, b}).shape(), (Shape{3, 3}));  // axis defaults to 0
  EXPECT_EQ(stack({a, a}).shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(zeros_like(a, DType::Int32).dtype(), DType::Int32);
  EXPECT_TRUE(ones({2}, std::nullopt, std::nullopt, true).requires_grad());
  EXPECT_EQ(maximum(a, 2).to_vector<float>(), std::vector<float>(6, 2.0f));
  EXPECT_EQ(sub(a, 1).to_vector<float>(), std::vector<float>(6, 0.0f));
  EXPECT_THROW(maximum(ones({2}, DType::Int64), 1.5),
               ValueError);  // an int tensor takes whole operands
  {
    TrainingGuard inference(false);  // dropout's training defaults to the global mode
    EXPECT_TRUE(dropout(a, 0.5).same(a));
  }
}

}  // namespace
}  // namespace encore
