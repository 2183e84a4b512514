// The public calling convention of a function, written once in its declaration row as a
// Python-style signature:
//
//   "max_pool1d(x: Tensor, pool_size: int = 2, strides: int | None = None, padding: str = 'valid')
//   -> Tensor"
//
// The Python module binds every declared function from it (encore.max_pool1d, and the Tensor
// method when the row asks for one), the type stubs are generated from it, and each function's
// test case gives its arguments in the same notation ("pool_size=3, padding='same'"), read by
// the same code in C++ and Python tests.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ops/tensor.h"

namespace encore {

class Generator;

/// The parameter types a signature may use (their Python spelling in the stubs).
enum class ParamType : uint8_t {
  Tensor,     // Tensor
  Operand,    // Tensor | float    (a tensor, or a Python number kept exact if it is an int)
  Tensors,    // list[Tensor]
  Int,        // int
  Float,      // float             (an int stays exact: int64 fills and bounds)
  Bool,       // bool
  Str,        // str
  Ints,       // tuple[int, ...]   (also accepts a single int)
  DType,      // DType             (encore.float32, "float32", numpy dtypes)
  Device,     // Device            (encore.Device, "cpu", "cuda:0")
  Generator,  // Generator
  Padding,    // str | int | tuple[int, int]
  Object,     // a class of the layers above (nn's Module, Recurrent): parse names them
};

/// A value bound to a parameter; Python's None is std::monostate.
using ArgValue =
    std::variant<std::monostate, Tensor, std::vector<Tensor>, int64_t, double, bool, std::string,
                 std::vector<int64_t>, DType, Device, Generator*, std::shared_ptr<void>>;

struct Param {
  std::string name;
  ParamType type = ParamType::Tensor;
  bool optional = false;      // "| None"
  bool varargs = false;       // "*shape: int": the remaining positionals (or one sequence)
  bool keyword_only = false;  // after "*" or "*args"
  std::optional<ArgValue> default_value;
  std::string default_text;  // as written, for stubs and docs
  std::string object_type;   // an Object parameter's class name, as written
};

struct Signature {
  std::string name;
  std::vector<Param> params;
  std::string returns;  // "Tensor", "tuple[Tensor, Tensor]", "None"

  /// Parses the notation above; throws ValueError naming the signature on a syntax error.
  /// `object_types` are the class names an Object parameter may have (none for ops).
  static Signature parse(std::string_view text,
                         std::span<const std::string_view> object_types = {});
  /// The signature as written (canonical spacing): also the stub line's body.
  std::string str() const;
  int index_of(std::string_view param) const;  // -1 when absent
};

/// Python literal values of a test case's arguments ("pool_size=3, padding='same', axes=(1, 2)"):
/// ints, floats (inf, nan), strings, True/False/None, tuples and lists of ints.
std::vector<std::pair<std::string, ArgValue>> parse_keyword_literals(std::string_view text);

/// A call's arguments bound to a signature, defaults filled in. An op's invoke function reads
/// them by position.
class CallArgs {
 public:
  CallArgs(const Signature& signature, std::vector<ArgValue> values)
      : signature_(&signature), values_(std::move(values)) {}
  /// Binds positional tensors and keyword literals (test cases); throws ValueError naming
  /// the function on a missing, unknown or mistyped argument.
  static CallArgs bind(const Signature& signature, std::span<const Tensor> positional,
                       const std::vector<std::pair<std::string, ArgValue>>& keywords);

  const Signature& signature() const { return *signature_; }
  bool is_none(int i) const { return std::holds_alternative<std::monostate>(values_[i]); }
  const Tensor& tensor(int i) const;
  std::optional<Tensor> optional_tensor(int i) const;
  const std::vector<Tensor>& tensors(int i) const;
  int64_t integer(int i) const;
  std::optional<int64_t> optional_integer(int i) const;
  double real(int i) const;
  std::optional<double> optional_real(int i) const;
  Scalar scalar(int i) const;
  /// A Tensor | float parameter: the tensor, or (undefined tensor and) the number.
  std::pair<Tensor, Scalar> operand(int i) const;
  bool boolean(int i) const;
  const std::string& string(int i) const;
  std::vector<int64_t> integers(int i) const;
  std::optional<std::vector<int64_t>> optional_integers(int i) const;
  std::optional<DType> dtype(int i) const;
  std::optional<Device> device(int i) const;
  Generator* generator(int i) const;  // null when None
  /// An Object parameter's value, of the class its parameter names (the binder checks it).
  const std::shared_ptr<void>& object(int i) const;
  const ArgValue& raw(int i) const { return values_[i]; }

 private:
  [[noreturn]] void wrong(int i, const char* expected) const;
  const Signature* signature_;
  std::vector<ArgValue> values_;
};

/// Checks a bound value against a parameter's type (and None where the parameter is optional),
/// converting where the notation allows (an int where a float or a tuple of ints is expected).
ArgValue check_arg(const Signature& s, const Param& p, ArgValue v);

}  // namespace encore
