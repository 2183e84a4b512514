// The cache key of a traced function: for each tensor argument its dtype, shape, strides,
// device and requires_grad; the static (non-tensor) arguments by value; and the global modes that
// change what a step computes (grad mode, training, TF32). A miss is explained against the
// nearest cached signature: which argument, which component, old and new values.
#pragma once

#include <string>
#include <variant>
#include <vector>

#include "ops/tensor.h"

namespace encore::graph {

/// An argument of a traced function: a tensor, or a static value that is baked into the graph.
using Arg = std::variant<Tensor, int64_t, double, bool, std::string>;

struct TensorKey {
  Shape shape;
  /// The argument's strides (0 on axes of size 1, where they mean nothing): the graph works on
  /// the caller's layout, so kernels see what they see eagerly and round alike.
  Strides strides;
  DType dtype;
  Device device;
  bool requires_grad;
  bool operator==(const TensorKey&) const = default;
};

/// Strides with those of size-1 axes set to 0.
Strides layout_of(const Shape& shape, Strides strides);

using ArgKey = std::variant<TensorKey, int64_t, double, bool, std::string>;

/// One reason for a trace, as data: which argument (index and name), what changed, on which
/// axis, old and new value. `str()` is the text explanations show.
struct RetraceCause {
  enum class Kind {
    FirstCall,  // nothing cached yet
    Cleared,    // the cache was cleared
    Shape,      // a tensor argument's shape (axis: the differing axis, -1 for a new rank)
    Strides,
    DType,
    Device,
    RequiresGrad,
    StaticArg,  // a static (non-tensor) argument's value
    ArgCount,   // a different number of arguments
    GradMode,
    Training,
    TF32,
    ReplacedParameter,  // a captured tensor's storage was replaced (set_data, Module::to)
    CapturedGone,       // a captured tensor no longer exists
    CapturedRequiresGrad,
    GradState,      // a .grad the function read is None / set / another tensor
    Eviction,       // the signature was cached and evicted
    ModuleMode,     // a module's train()/eval() flag read while tracing (arg_name: the module)
    ModuleChanged,  // a child or parameter of a module that ran was set or removed (arg_name: the
                    // module)
    Threads,        // the CPU thread count (set_num_threads): its kernels were prepared for one
  };
  Kind kind = Kind::FirstCall;
  int arg = -1;          // argument index, -1 when not about one argument
  std::string arg_name;  // its name, or the captured tensor's label
  int axis = -1;
  std::string old_value, new_value;
  std::string note;  // free text for the kinds that need it (the eviction's cache size)

  std::string str() const;
};
std::string_view kind_name(RetraceCause::Kind k);

struct Signature {
  std::vector<ArgKey> args;
  bool grad_mode = true, training = true, tf32 = false;
  int threads = 1;  // CPU kernels (oneDNN primitives) are prepared for a thread count

  /// The signature of a call (reads the current global modes).
  static Signature of(const std::vector<Arg>& args);
  /// Fast check that a call has this signature; allocates nothing.
  bool matches(const std::vector<Arg>& args) const;
  /// Number of differing components (arguments, dims, modes): smaller is nearer.
  int distance(const Signature& other) const;
  /// What changed from `before` to this signature, one clause per difference:
  /// "arg 0 (x): shape (32, 140, 30) -> (32, 150, 30), axis 1: 140 -> 150".
  std::string diff(const Signature& before, const std::vector<std::string>& arg_names) const;
  /// The same differences as data, one cause per shape axis, dtype, mode, ...
  std::vector<RetraceCause> changes(const Signature& before,
                                    const std::vector<std::string>& arg_names) const;
  /// "(x: (32, 140, 30) float32 cpu, 5) grad training"
  std::string str(const std::vector<std::string>& arg_names) const;
};

}  // namespace encore::graph
