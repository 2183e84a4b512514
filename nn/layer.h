// A layer is declared once, as ops are (ops/op.h): its options, each with its type, default and
// doc, in one list that stamps out the C++ options struct,
//
//   #define ENCORE_CONV1D_OPTIONS(X)  (each line but the last ends with a backslash)
//     X(int64_t, strides, 1, "steps between the starts of two windows")
//     X(std::string, padding, "valid", "'valid', 'same' or 'causal'")
//   ENCORE_LAYER_OPTIONS(Conv1DOptions, ENCORE_CONV1D_OPTIONS);   // Conv1DOptions{.strides = 2}
//
// and one row (a LayerDef with designated initializers) beside the layer's code:
//
//   const LayerDef& conv1d_layer = define_layer({
//       .name = "Conv1D",
//       .signature = "Conv1D(filters: int, kernel_size: int)",  // the options follow
//       .options = &Conv1DOptions::fields,
//       .make = [](const CallArgs& a) -> LayerPtr {
//         return std::make_shared<Conv1D>(a.integer(0), a.integer(1),
//         options_of<Conv1DOptions>(a));
//       },
//       .doc = "1-D convolution over steps ...",
//       .example = {.args = "filters=4, kernel_size=3", .input = {{2, 9, 3}}},
//   });
//
// The row's signature (its required arguments, then every option with its default) is what
// Python binds (bindings/nn.cpp: one generic __init__), what the stub generator writes into
// _C.pyi, what docs/LAYERS.md lists (a test keeps it current) and what the layer table tests
// run (tests/cpp/test_layer_table.cpp, tests/python/test_layer_table.py). Defaults are written
// once, in the option list.
#pragma once

#include <charconv>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "nn/module.h"
#include "ops/op.h"
#include "ops/signature.h"

namespace encore::nn {

using LayerPtr = std::shared_ptr<Module>;

/// One option of a layer: its parameter in the layer's signature (name, type, default) and how
/// a bound value is written into the options struct.
struct OptionField {
  Param param;
  const char* doc = "";
  /// Writes a value checked against `param` (by check_arg) into the struct; `layer` names the
  /// layer in errors.
  void (*set)(void* options, const ArgValue& value, const char* layer, const char* name) = nullptr;
};
using OptionList = const std::vector<OptionField>& (*)();

/// The names of an enum option's values, in the enum's order: an enum type E used as an option
/// declares `std::span<const char* const> option_names(E)` (found by argument-dependent lookup).
template <class E>
concept NamedEnum = std::is_enum_v<E> && requires(E e) {
  option_names(e);
};

namespace option_traits {

template <class T> struct OptionTraits;
template <> struct OptionTraits<int64_t> {
  static constexpr bool optional = false;
  static constexpr ParamType type = ParamType::Int;
  static std::string text(int64_t v) { return std::to_string(v); }
  static ArgValue value(int64_t v) { return v; }
  static int64_t from(const ArgValue& v, const char*, const char*) { return std::get<int64_t>(v); }
};
template <> struct OptionTraits<double> {
  static constexpr bool optional = false;
  static constexpr ParamType type = ParamType::Float;
  static std::string text(double v) {  // Python's repr: the shortest text that reads back
    char buf[32];
    std::string s(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
    return s.find_first_of(".en") == std::string::npos ? s + ".0" : s;
  }
  static ArgValue value(double v) { return v; }
  static double from(const ArgValue& v, const char*, const char*) {
    const int64_t* i = std::get_if<int64_t>(&v);
    return i ? static_cast<double>(*i) : std::get<double>(v);
  }
};
template <> struct OptionTraits<bool> {
  static constexpr bool optional = false;
  static constexpr ParamType type = ParamType::Bool;
  static std::string text(bool v) { return v ? "True" : "False"; }
  static ArgValue value(bool v) { return v; }
  static bool from(const ArgValue& v, const char*, const char*) { return std::get<bool>(v); }
};
template <> struct OptionTraits<std::string> {
  static constexpr bool optional = false;
  static constexpr ParamType type = ParamType::Str;
  static std::string text(const std::string& v) { return "'" + v + "'"; }
  static ArgValue value(const std::string& v) { return v; }
  static std::string from(const ArgValue& v, const char*, const char*) {
    return std::get<std::string>(v);
  }
};
template <class T> struct OptionTraits<std::optional<T>> {
  static constexpr bool optional = true;
  static constexpr ParamType type = OptionTraits<T>::type;
  static std::string text(const std::optional<T>& v) {
    return v ? OptionTraits<T>::text(*v) : "None";
  }
  static ArgValue value(const std::optional<T>& v) {
    return v ? OptionTraits<T>::value(*v) : ArgValue();
  }
  static std::optional<T> from(const ArgValue& v, const char* layer, const char* name) {
    if (std::holds_alternative<std::monostate>(v)) return std::nullopt;
    return OptionTraits<T>::from(v, layer, name);
  }
};
template <NamedEnum E> struct OptionTraits<E> {
  static constexpr bool optional = false;
  static constexpr ParamType type = ParamType::Str;
  static std::string text(E v) {
    return std::string("'") + option_names(v)[static_cast<size_t>(v)] + "'";
  }
  static ArgValue value(E v) { return std::string(option_names(v)[static_cast<size_t>(v)]); }
  static E from(const ArgValue& v, const char* layer, const char* name) {
    const std::span<const char* const> names = option_names(E{});
    const std::string& s = std::get<std::string>(v);
    for (size_t i = 0; i < names.size(); ++i)
      if (s == names[i]) return static_cast<E>(i);
    std::string expected;
    for (size_t i = 0; i < names.size(); ++i)
      expected += (i ? ", '" : "'") + std::string(names[i]) + "'";
    throw ValueError(::encore::detail::cat("[", layer, "] ", name, " must be one of ", expected,
                                           ", got '", s, "'"));
  }
};

template <class C, class T> C class_of(T C::*);
template <class C, class T> T type_of(T C::*);

}  // namespace option_traits

/// The field of option `Member` (a pointer to a member of an options struct) named `name`; its
/// default is the struct's.
template <auto Member> OptionField option_field(const char* name, const char* doc) {
  using C = decltype(option_traits::class_of(Member));
  using T = decltype(option_traits::type_of(Member));
  using Traits = option_traits::OptionTraits<T>;
  const T fallback = C{}.*Member;
  OptionField f;
  f.param.name = name;
  f.param.type = Traits::type;
  f.param.optional = Traits::optional;
  f.param.default_value = Traits::value(fallback);
  f.param.default_text = Traits::text(fallback);
  f.doc = doc;
  f.set = [](void* options, const ArgValue& v, const char* layer, const char* option) {
    static_cast<C*>(options)->*Member = Traits::from(v, layer, option);
  };
  return f;
}

// Stamps out the options struct of a layer from its list: `X(type, name, default, doc)` per
// option. The struct stays an aggregate (Conv1DOptions{.strides = 2}); fields() is its row part.
#define ENCORE_LAYER_OPTION_MEMBER(type, name, value, doc) type name = value;
#define ENCORE_LAYER_OPTION_FIELD(type, name, value, doc) \
  ::encore::nn::option_field<&Options::name>(#name, doc),
#define ENCORE_LAYER_OPTIONS(Name, LIST)                                                         \
  struct Name {                                                                                  \
    LIST(ENCORE_LAYER_OPTION_MEMBER)                                                             \
    bool operator==(const Name&) const = default;                                                \
    static const std::vector<::encore::nn::OptionField>& fields() {                              \
      using Options = Name;                                                                      \
      static const std::vector<::encore::nn::OptionField> list{LIST(ENCORE_LAYER_OPTION_FIELD)}; \
      return list;                                                                               \
    }                                                                                            \
  }

/// One call of a layer for the layer table: made from `args` (Python keyword notation, as an
/// op example's) or by `make` (a layer that takes another layer), then called on an input.
struct LayerExample {
  const char* args = "";
  LayerPtr (*make)() = nullptr;
  ExampleInput input = {};
};

/// Makes the layer from arguments bound to its signature.
using MakeLayerFn = LayerPtr (*)(const CallArgs& args);

struct LayerDef {
  /// The class name (Python's: encore.nn.Conv1D).
  const char* name = nullptr;
  /// The required arguments in the notation of ops/signature.h ("Conv1D(filters: int)"); a
  /// parameter of type Module or Recurrent takes a layer of that class. The options follow.
  const char* signature = nullptr;
  OptionList options = nullptr;  // &XOptions::fields; null: no options
  MakeLayerFn make = nullptr;
  const char* doc = "";
  LayerExample example = {};
};

/// Adds a layer row to the registry (from a static initializer, as define_op).
const LayerDef& define_layer(LayerDef&& def);
/// Every layer row, in registration order.
std::span<const LayerDef* const> all_layers();
/// The row named `name` (ValueError when there is none).
const LayerDef& layer_def(std::string_view name);
/// The full signature: the required arguments, then the options with their defaults.
const Signature& layer_signature(const LayerDef& def);
/// The options of `def` (empty when it has none).
std::span<const OptionField> layer_options(const LayerDef& def);

/// The example's input, floating values in `float_dtype` (the same in C++ and Python tests).
Tensor layer_example_input(const LayerDef& def, DType float_dtype, Device device);
/// The example's layer: made from its arguments bound to the row's signature, or by its make.
LayerPtr make_example_layer(const LayerDef& def);

/// A class name as Keras names layers: "MaxPooling1D" -> "max_pooling1d" (a layer's type_name,
/// and how errors name it).
std::string snake_case(std::string_view class_name);

/// The options struct `T` from a call's arguments (bound to a layer signature with T's options).
template <class T> T options_of(const CallArgs& args) {
  T options;
  const std::string layer = snake_case(args.signature().name);
  for (const OptionField& f : T::fields()) {
    const int i = args.signature().index_of(f.param.name);
    ENCORE_CHECK(i >= 0, ValueError, "[", layer, "] has no option ", f.param.name);
    f.set(&options, args.raw(i), layer.c_str(), f.param.name.c_str());
  }
  return options;
}

/// A layer argument (a parameter of type Module or Recurrent) as an `L`; ValueError naming the
/// layer when it is another kind of layer.
template <class L> std::shared_ptr<L> layer_arg(const CallArgs& args, int i) {
  auto layer = std::dynamic_pointer_cast<L>(std::static_pointer_cast<Module>(args.object(i)));
  ENCORE_CHECK(layer, ValueError, "[", snake_case(args.signature().name), "] argument '",
               args.signature().params[i].name, "' must be a ",
               args.signature().params[i].object_type, " layer");
  return layer;
}

}  // namespace encore::nn
