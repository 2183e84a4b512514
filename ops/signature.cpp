#include "ops/signature.h"

#include <cctype>
#include <charconv>
#include <cmath>

namespace encore {

namespace {

struct TypeName {
  std::string_view text;
  ParamType type;
};
// Longest spellings first: "str | int | tuple[int, int]" must not be read as "str".
constexpr TypeName kTypes[] = {
    {"str | int | tuple[int, int]", ParamType::Padding},
    {"tuple[int, ...]", ParamType::Ints},
    {"Tensor | float", ParamType::Operand},
    {"list[Tensor]", ParamType::Tensors},
    {"Tensor", ParamType::Tensor},
    {"int", ParamType::Int},
    {"float", ParamType::Float},
    {"bool", ParamType::Bool},
    {"str", ParamType::Str},
    {"DType", ParamType::DType},
    {"Device", ParamType::Device},
    {"Generator", ParamType::Generator},
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Splits at `sep` outside brackets and quotes.
std::vector<std::string_view> split_top(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  int depth = 0;
  char quote = 0;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '(' || c == '[') {
      ++depth;
    } else if (c == ')' || c == ']') {
      --depth;
    } else if (c == sep && depth == 0) {
      parts.push_back(trim(s.substr(start, i - start)));
      start = i + 1;
    }
  }
  if (!trim(s.substr(start)).empty() || !parts.empty()) parts.push_back(trim(s.substr(start)));
  return parts;
}

[[noreturn]] void syntax(std::string_view text, const std::string& what) {
  throw ValueError(detail::cat("[signature] ", what, " in '", text, "'"));
}

// One Python literal: an int, a float (inf, nan), a string, True/False/None, or a tuple or
// list of ints.
ArgValue parse_literal(std::string_view text, std::string_view context) {
  const std::string_view s = trim(text);
  if (s.empty()) syntax(context, "missing value");
  if (s == "None") return std::monostate{};
  if (s == "True") return true;
  if (s == "False") return false;
  if ((s.front() == '\'' || s.front() == '"') && s.size() >= 2 && s.back() == s.front())
    return std::string(s.substr(1, s.size() - 2));
  if (s.front() == '(' || s.front() == '[') {
    const char close = s.front() == '(' ? ')' : ']';
    if (s.back() != close) syntax(context, "unbalanced brackets");
    std::vector<int64_t> values;
    for (std::string_view item : split_top(s.substr(1, s.size() - 2), ',')) {
      if (item.empty()) continue;  // "(3,)"
      const ArgValue v = parse_literal(item, context);
      const int64_t* i = std::get_if<int64_t>(&v);
      if (!i) syntax(context, "sequences may hold only ints");
      values.push_back(*i);
    }
    return values;
  }
  if (s == "inf" || s == "float('inf')") return INFINITY;
  if (s == "-inf" || s == "float('-inf')") return -INFINITY;
  if (s == "nan" || s == "float('nan')") return NAN;
  const bool is_float = s.find_first_of(".eE") != std::string_view::npos;
  if (!is_float) {
    int64_t v = 0;
    const auto [end, err] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (err == std::errc() && end == s.data() + s.size()) return v;
  } else {
    double v = 0;
    const auto [end, err] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (err == std::errc() && end == s.data() + s.size()) return v;
  }
  syntax(context, "cannot read the value '" + std::string(s) + "'");
}

const char* type_text(ParamType t) {
  for (const TypeName& n : kTypes)
    if (n.type == t) return n.text.data();
  return "?";
}

std::optional<DType> dtype_named(const std::string& s) {
  for (DType d : {DType::Float32, DType::Float64, DType::Int32, DType::Int64})
    if (name(d) == s) return d;
  return std::nullopt;
}

}  // namespace

Signature Signature::parse(std::string_view text, std::span<const std::string_view> object_types) {
  Signature sig;
  const size_t open = text.find('('), close = text.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open)
    syntax(text, "expected name(parameters)");
  sig.name = std::string(trim(text.substr(0, open)));
  const std::string_view rest = trim(text.substr(close + 1));
  if (!rest.empty()) {
    if (rest.substr(0, 2) != "->") syntax(text, "expected '-> type' after the parameters");
    sig.returns = std::string(trim(rest.substr(2)));
  }
  bool keyword_only = false;
  for (std::string_view item : split_top(text.substr(open + 1, close - open - 1), ',')) {
    if (item == "*") {
      keyword_only = true;
      continue;
    }
    Param p;
    const std::vector<std::string_view> name_default = split_top(item, '=');
    if (name_default.empty() || name_default.size() > 2)
      syntax(text, "bad parameter '" + std::string(item) + "'");
    const size_t colon = name_default[0].find(':');
    if (colon == std::string_view::npos)
      syntax(text, "parameter '" + std::string(item) + "' has no type");
    std::string_view pname = trim(name_default[0].substr(0, colon));
    std::string_view ptype = trim(name_default[0].substr(colon + 1));
    if (!pname.empty() && pname.front() == '*') {
      p.varargs = true;
      pname.remove_prefix(1);
    }
    p.name = std::string(pname);
    p.keyword_only = keyword_only;
    if (p.varargs) keyword_only = true;
    bool matched = false;
    for (const TypeName& n : kTypes) {
      if (ptype.substr(0, n.text.size()) != n.text) continue;
      std::string_view tail = trim(ptype.substr(n.text.size()));
      if (tail == "| None")
        p.optional = true;
      else if (!tail.empty())
        continue;
      p.type = n.type;
      matched = true;
      break;
    }
    for (std::string_view o : object_types) {
      if (matched || ptype != o) continue;
      p.type = ParamType::Object;
      p.object_type = std::string(o);
      matched = true;
    }
    if (!matched) syntax(text, "unknown type '" + std::string(ptype) + "'");
    if (name_default.size() == 2) {
      p.default_text = std::string(name_default[1]);
      p.default_value = parse_literal(name_default[1], text);
    }
    sig.params.push_back(std::move(p));
  }
  return sig;
}

std::string Signature::str() const {
  std::string s = name + "(";
  bool star = false;
  for (size_t i = 0; i < params.size(); ++i) {
    const Param& p = params[i];
    if (i) s += ", ";
    if (p.keyword_only && !star && !p.varargs) {
      s += "*, ";
      star = true;
    }
    if (p.varargs) star = true;
    s += (p.varargs ? "*" : "") + p.name + ": " +
         (p.type == ParamType::Object ? p.object_type : type_text(p.type)) +
         (p.optional ? " | None" : "");
    if (p.default_value) s += " = " + p.default_text;
  }
  s += ")";
  if (!returns.empty()) s += " -> " + returns;
  return s;
}

int Signature::index_of(std::string_view param) const {
  for (size_t i = 0; i < params.size(); ++i)
    if (params[i].name == param) return static_cast<int>(i);
  return -1;
}

std::vector<std::pair<std::string, ArgValue>> parse_keyword_literals(std::string_view text) {
  std::vector<std::pair<std::string, ArgValue>> out;
  for (std::string_view item : split_top(text, ',')) {
    const std::vector<std::string_view> kv = split_top(item, '=');
    if (kv.size() != 2 || kv[0].empty()) syntax(text, "expected name=value");
    out.emplace_back(std::string(kv[0]), parse_literal(kv[1], text));
  }
  return out;
}

ArgValue check_arg(const Signature& s, const Param& p, ArgValue v) {
  auto wrong = [&](const char* got) -> ArgValue {
    throw DTypeError(
        detail::cat("[", s.name, "] argument '", p.name, "' must be ",
                    p.type == ParamType::Object ? p.object_type.c_str() : type_text(p.type),
                    p.optional ? " or None" : "", ", got ", got));
  };
  if (std::holds_alternative<std::monostate>(v)) return p.optional ? v : wrong("None");
  // *shape: int collects the positionals (or one sequence of them).
  if (p.varargs && p.type == ParamType::Int) {
    if (const int64_t* i = std::get_if<int64_t>(&v)) return std::vector<int64_t>{*i};
    return std::holds_alternative<std::vector<int64_t>>(v) ? v : wrong("something else than ints");
  }
  switch (p.type) {
    case ParamType::Tensor:
      return std::holds_alternative<Tensor>(v) ? v : wrong("a non-tensor");
    case ParamType::Tensors:
      return std::holds_alternative<std::vector<Tensor>>(v)
                 ? v
                 : wrong("something else than a list of tensors");
    case ParamType::Int:
      return std::holds_alternative<int64_t>(v) ? v : wrong("a non-integer");
    case ParamType::Float:
      return std::holds_alternative<double>(v) || std::holds_alternative<int64_t>(v)
                 ? v
                 : wrong("a non-number");
    case ParamType::Operand:
      return std::holds_alternative<Tensor>(v) || std::holds_alternative<double>(v) ||
                     std::holds_alternative<int64_t>(v)
                 ? v
                 : wrong("something else");
    case ParamType::Bool:
      return std::holds_alternative<bool>(v) ? v : wrong("a non-bool");
    case ParamType::Str:
      return std::holds_alternative<std::string>(v) ? v : wrong("a non-string");
    case ParamType::Ints:
      if (const int64_t* i = std::get_if<int64_t>(&v)) return std::vector<int64_t>{*i};
      return std::holds_alternative<std::vector<int64_t>>(v) ? v
                                                             : wrong("something else than ints");
    case ParamType::DType:
      if (const std::string* n = std::get_if<std::string>(&v)) {
        if (const auto d = dtype_named(*n)) return *d;
        return wrong(("'" + *n + "'").c_str());
      }
      return std::holds_alternative<DType>(v) ? v : wrong("a non-dtype");
    case ParamType::Device:
      if (const std::string* n = std::get_if<std::string>(&v)) return parse_device(*n);
      return std::holds_alternative<Device>(v) ? v : wrong("a non-device");
    case ParamType::Generator:
      return std::holds_alternative<Generator*>(v) ? v : wrong("a non-generator");
    case ParamType::Padding:
      if (const auto* pair = std::get_if<std::vector<int64_t>>(&v))
        return pair->size() == 2 ? v : wrong("a sequence whose length is not 2");
      return std::holds_alternative<std::string>(v) || std::holds_alternative<int64_t>(v)
                 ? v
                 : wrong("something else");
    case ParamType::Object:
      return std::holds_alternative<std::shared_ptr<void>>(v)
                 ? v
                 : wrong(("a non-" + p.object_type).c_str());
  }
  return v;
}

CallArgs CallArgs::bind(const Signature& signature, std::span<const Tensor> positional,
                        const std::vector<std::pair<std::string, ArgValue>>& keywords) {
  std::vector<std::optional<ArgValue>> slots(signature.params.size());
  size_t next = 0;
  for (const Tensor& t : positional) {
    while (next < slots.size() && signature.params[next].type != ParamType::Tensor &&
           signature.params[next].type != ParamType::Operand &&
           signature.params[next].type != ParamType::Tensors)
      ++next;
    ENCORE_CHECK(next < slots.size(), ValueError, "[", signature.name, "] takes ", next,
                 " tensor arguments, got ", positional.size());
    if (signature.params[next].type == ParamType::Tensors) {
      std::vector<Tensor> rest(
          positional.begin() + static_cast<std::ptrdiff_t>(&t - positional.data()),
          positional.end());
      slots[next++] = std::move(rest);
      break;
    }
    slots[next++] = t;
  }
  for (const auto& [key, value] : keywords) {
    const int i = signature.index_of(key);
    ENCORE_CHECK(i >= 0, ValueError, "[", signature.name, "] has no argument '", key, "'");
    ENCORE_CHECK(!slots[i], ValueError, "[", signature.name, "] got argument '", key, "' twice");
    slots[i] = value;
  }
  std::vector<ArgValue> values;
  values.reserve(slots.size());
  for (size_t i = 0; i < slots.size(); ++i) {
    const Param& p = signature.params[i];
    if (!slots[i]) {
      ENCORE_CHECK(p.default_value || p.varargs, ValueError, "[", signature.name,
                   "] missing argument '", p.name, "'");
      slots[i] = p.default_value ? *p.default_value : ArgValue(std::vector<int64_t>{});
    }
    values.push_back(check_arg(signature, p, std::move(*slots[i])));
  }
  return CallArgs(signature, std::move(values));
}

void CallArgs::wrong(int i, const char* expected) const {
  throw DTypeError(detail::cat("[", signature_->name, "] argument '", signature_->params[i].name,
                               "' is not ", expected));
}

const Tensor& CallArgs::tensor(int i) const {
  if (const Tensor* t = std::get_if<Tensor>(&values_[i])) return *t;
  wrong(i, "a tensor");
}
std::optional<Tensor> CallArgs::optional_tensor(int i) const {
  if (is_none(i)) return std::nullopt;
  return tensor(i);
}
const std::vector<Tensor>& CallArgs::tensors(int i) const {
  if (const auto* t = std::get_if<std::vector<Tensor>>(&values_[i])) return *t;
  wrong(i, "a list of tensors");
}
int64_t CallArgs::integer(int i) const {
  if (const int64_t* v = std::get_if<int64_t>(&values_[i])) return *v;
  wrong(i, "an integer");
}
std::optional<int64_t> CallArgs::optional_integer(int i) const {
  if (is_none(i)) return std::nullopt;
  return integer(i);
}
double CallArgs::real(int i) const {
  if (const double* v = std::get_if<double>(&values_[i])) return *v;
  if (const int64_t* v = std::get_if<int64_t>(&values_[i])) return static_cast<double>(*v);
  wrong(i, "a number");
}
std::optional<double> CallArgs::optional_real(int i) const {
  if (is_none(i)) return std::nullopt;
  return real(i);
}
Scalar CallArgs::scalar(int i) const {
  if (const int64_t* v = std::get_if<int64_t>(&values_[i])) return *v;
  if (const double* v = std::get_if<double>(&values_[i])) return *v;
  wrong(i, "a number");
}
std::pair<Tensor, Scalar> CallArgs::operand(int i) const {
  if (const Tensor* t = std::get_if<Tensor>(&values_[i])) return {*t, Scalar()};
  return {Tensor(), scalar(i)};
}
bool CallArgs::boolean(int i) const {
  if (const bool* v = std::get_if<bool>(&values_[i])) return *v;
  wrong(i, "a bool");
}
const std::string& CallArgs::string(int i) const {
  if (const std::string* v = std::get_if<std::string>(&values_[i])) return *v;
  wrong(i, "a string");
}
std::vector<int64_t> CallArgs::integers(int i) const {
  if (const auto* v = std::get_if<std::vector<int64_t>>(&values_[i])) return *v;
  if (const int64_t* v = std::get_if<int64_t>(&values_[i])) return {*v};
  wrong(i, "a sequence of integers");
}
std::optional<std::vector<int64_t>> CallArgs::optional_integers(int i) const {
  if (is_none(i)) return std::nullopt;
  return integers(i);
}
std::optional<DType> CallArgs::dtype(int i) const {
  if (is_none(i)) return std::nullopt;
  if (const DType* v = std::get_if<DType>(&values_[i])) return *v;
  wrong(i, "a dtype");
}
std::optional<Device> CallArgs::device(int i) const {
  if (is_none(i)) return std::nullopt;
  if (const Device* v = std::get_if<Device>(&values_[i])) return *v;
  wrong(i, "a device");
}
const std::shared_ptr<void>& CallArgs::object(int i) const {
  if (const auto* v = std::get_if<std::shared_ptr<void>>(&values_[i])) return *v;
  wrong(i, "an object");
}
Generator* CallArgs::generator(int i) const {
  if (is_none(i)) return nullptr;
  if (Generator* const* v = std::get_if<Generator*>(&values_[i])) return *v;
  wrong(i, "a generator");
}

}  // namespace encore
