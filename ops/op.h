// An op is declared once, as one row (an OpDef with designated initializers) beside its shape
// inference and backward formula, in its family's file under ops/defs/:
//
//   OpDef& max_pool1d_op = define_op({
//       .name = "max_pool1d",
//       .attrs = &attrs_of<PoolAttrs>,
//       .infer = infer_pool,
//       .backward = max_pool1d_backward,
//       .save = Save::Inputs | Save::Outputs,
//       .cpu = {max_pool1d_cpu},
//       .signature = "max_pool1d(x: Tensor, pool_size: int = 2, strides: int | None = None, "
//                    "padding: str = 'valid') -> Tensor",
//       .invoke = [](const CallArgs& a) -> Outputs { return {max_pool1d(a.tensor(0), ...)}; },
//       .examples = {{.inputs = {{{2, 7, 3}}}, .args = "pool_size=3, padding='same'"},
//                    {.inputs = {{{1, 2, 3}}}, .args = "pool_size=3, padding='same'"}},
//   });
//
// The row says everything the runtime, the bindings and the tests need: arity, attributes,
// which inputs it writes and which get no gradient, what the backward pass saves, the CPU
// kernel (other backends register theirs by the op's name), the public signature (Python
// binds it and its stubs are generated from it) and its example calls (`examples`: a typical
// call, then edge cases), each of which drives the float64 gradcheck, the CPU/CUDA parity test,
// the eager/replay test and a Python call checked against the C++ one.
// Public functions that are compositions of other ops get a row too (kind Composite: no
// kernel, only the signature, invoke and example).
#pragma once

#include <array>
#include <cstring>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/tensor.h"

namespace encore {

class Attrs;
class CallArgs;
struct OpDef;

constexpr int kMaxOutputs = 8;

/// Geometry of an op output. Compute ops leave strides empty (the output is contiguous);
/// view ops fill strides and offset relative to their input's storage.
struct TensorMeta {
  Shape shape;
  Strides strides;
  int64_t offset = 0;
  DType dtype = DType::Float32;
  Device device;
};

/// A tensor as a kernel sees it.
struct TensorRef {
  void* data = nullptr;
  Shape shape;
  Strides strides;
  DType dtype = DType::Float32;
  Device device;

  int64_t numel() const { return shape.numel(); }
  bool contiguous() const { return is_contiguous(shape, strides); }
  template <class T> T* ptr() const { return static_cast<T*>(data); }
};

/// How an op's attribute struct is printed and compared (see attrs_of).
struct AttrType {
  std::string (*str)(const Attrs&);
  bool (*equal)(const Attrs&, const Attrs&);
};

/// The non-tensor arguments of one op call: a small trivially copyable struct of the op's own
/// type (declared with its family), stored inline so graph and tape nodes can copy it.
class Attrs {
 public:
  static constexpr size_t kCapacity = 128;

  Attrs() = default;
  template <class A>
  requires(!std::is_same_v<std::decay_t<A>, Attrs>)
      Attrs(const A& a);  // NOLINT: implicit, so call sites pass the struct itself

  /// The attributes as `A`; an internal error if the op was called with another type.
  template <class A> const A& as() const;
  bool empty() const { return type_ == nullptr; }
  const AttrType* type() const { return type_; }
  std::string str() const { return type_ ? type_->str(*this) : std::string(); }
  friend bool operator==(const Attrs& a, const Attrs& b) {
    return a.type_ == b.type_ && (!a.type_ || a.type_->equal(a, b));
  }

 private:
  [[noreturn]] static void wrong_type();
  alignas(8) unsigned char bytes_[kCapacity];
  const AttrType* type_ = nullptr;
};

/// The printer and comparison of attribute struct `A` (which has str() and operator==).
template <class A>
inline constexpr AttrType attrs_of{
    [](const Attrs& a) { return a.as<A>().str(); },
    [](const Attrs& a, const Attrs& b) { return a.as<A>() == b.as<A>(); },
};

template <class A>
requires(!std::is_same_v<std::decay_t<A>, Attrs>) Attrs::Attrs(const A& a) : type_(&attrs_of<A>) {
  static_assert(std::is_trivially_copyable_v<A> && sizeof(A) <= kCapacity && alignof(A) <= 8,
                "op attributes are small trivially copyable structs");
  std::memcpy(bytes_, &a, sizeof(A));
}

template <class A> const A& Attrs::as() const {
  if (type_ != &attrs_of<A>) wrong_type();
  return *std::launder(reinterpret_cast<const A*>(bytes_));
}

struct KernelCtx {
  std::span<const TensorRef> in;
  std::span<const TensorRef> out;
  const Attrs& attrs;
  /// The kernel's prepared per-shape state (ops/prepared.h); null when it has no PrepareFn.
  void* state = nullptr;
  /// The op's name, for the kernel's error messages.
  const char* op = "";
};

/// Bit i of a per-input mask of an OpDef: inputs past its 32 bits (the many inputs of stack or
/// concat) are never marked.
constexpr bool input_bit(uint32_t mask, size_t i) { return i < 32 && (mask >> i & 1u); }

struct BackwardCtx {
  std::span<const Tensor> inputs;   // saved inputs (undefined unless the op saves them)
  std::span<const Tensor> outputs;  // saved outputs (undefined unless the op saves them)
  std::span<const Tensor> grads;    // gradient per output; undefined means zero (multi-output
                                    // ops materialize what their formula needs)
  std::span<const TensorMeta> input_metas;  // shape, dtype and device of every input
  const Attrs& attrs;
  std::span<const uint8_t> needs;  // per input: whether it needs a gradient (any number of
                                   // inputs: stack and concat take many)
  bool need(int i) const { return needs[i] != 0; }
  const Shape& input_shape(int i) const { return input_metas[i].shape; }
};

/// Fills the output metas and returns how many outputs the call has; throws, naming the op and
/// the shapes, on invalid inputs.
using InferFn = int (*)(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs,
                        TensorMeta* out);
using KernelFn = void (*)(const KernelCtx& ctx);
/// Per-shape setup of a kernel (a oneDNN primitive, a cuDNN algorithm): called once per
/// geometry by the dispatcher's cache, never during a replay or a CUDA Graph capture.
using PrepareFn = std::shared_ptr<void> (*)(const KernelCtx& ctx);
/// Writes the gradient of each input into `grad_in` (left undefined where not needed),
/// using ordinary ops so that a traced step records its own backward pass.
using BackwardFn = void (*)(const BackwardCtx& ctx, Tensor* grad_in);
/// For a view of a part of its input (slice): adds the gradient of its output into `into`, a
/// buffer of input 0's shape that the engine owns, in place. Many parts of one tensor (the
/// steps of a sequence) then cost the size of each part, not a full-size gradient per part.
using AccumulateFn = void (*)(const BackwardCtx& ctx, Tensor& into);
/// Calls the public function with arguments bound to its signature.
using Outputs = std::vector<Tensor>;
using InvokeFn = Outputs (*)(const CallArgs& args);

/// What a prepared state chose (e.g. the oneDNN implementation), for graph dumps.
using DescribeFn = std::string (*)(const void* state);
/// Whether a call may want a prepared state, from its shapes and dtypes alone: a kernel whose
/// PrepareFn returns null for most calls (a small matmul runs BLAS) saves them the cache's
/// lookup. Null: every call looks.
using WantsStateFn = bool (*)(const KernelCtx& ctx);

struct Kernel {
  KernelFn run = nullptr;
  PrepareFn prepare = nullptr;
  DescribeFn describe = nullptr;
  WantsStateFn wants_state = nullptr;
};

enum class OpKind : uint8_t {
  Compute,    // allocates outputs, runs a kernel
  View,       // output shares the input's storage; no kernel
  InPlace,    // writes its first input(s); no outputs
  Composite,  // a public function made of other ops: never dispatched
};

/// What the layout pass (graph/passes.cpp) knows of an op: the conversions between channels-last
/// and oneDNN's blocked layout, and the convolutions, whose blocked outputs hold zeros in the
/// last block's missing channels (to_blocked's do too): after one of those, a from_blocked ->
/// to_blocked round trip is the identity and is removed.
enum class LayoutRole : uint8_t { None, ToBlocked, FromBlocked, Convolution };

/// The cell of a fused whole-sequence recurrent op (cuDNN's or oneDNN's RNN): the recurrent
/// layers ask the registry for the one that runs on their input's device (fused_recurrence_op).
enum class RecurrentCell : uint8_t { None, Lstm, Gru };

/// What the tape keeps for the backward formula.
enum class Save : uint8_t { None = 0, Inputs = 1, Outputs = 2 };
constexpr Save operator|(Save a, Save b) { return Save(uint8_t(a) | uint8_t(b)); }
constexpr bool operator&(Save a, Save b) { return (uint8_t(a) & uint8_t(b)) != 0; }

/// How a test makes one input of an op's example call (float64 for gradcheck; float32 for the
/// backend parity test).
struct ExampleInput {
  Shape shape = {};
  enum Values : uint8_t {
    Uniform,   // uniform in [-1, 1), |x| >= 0.05: never at a kink at zero
    Positive,  // in [0.5, 1.5): log, sqrt, division
    Distinct,  // a permutation of well separated values: max, sorting, ties break gradcheck
    Index,     // int64 in [0, bound)
    State,     // a generator state (int64 (seed, offset))
  } values = Uniform;
  int64_t bound = 0;
};

/// One call of the op for the test table (tests/cpp/test_op_table.cpp, tests/python).
struct Example {
  std::vector<ExampleInput> inputs = {};
  /// Keyword arguments of the public function, in Python notation ("pool_size=3").
  const char* args = "";
  /// For ops without a public function: how the example calls the op.
  Outputs (*call)(std::span<const Tensor> in) = nullptr;
  /// Inputs gradcheck differentiates with respect to (bit i); default every floating input.
  uint32_t grad_inputs = ~0u;
  /// Relative tolerance of the float32 CPU/CUDA parity test.
  double parity_tolerance = 1e-5;
  /// Finite-difference step of gradcheck (larger for an op that rounds through float32).
  double gradcheck_eps = 1e-6;
  /// A float32-only fast path's composed equivalent: the table checks the example against it
  /// (within parity_tolerance, on the CPU) instead of running gradcheck in float64. Like `call`,
  /// it takes the example's inputs; it returns what `call` does.
  Outputs (*reference)(std::span<const Tensor> in) = nullptr;
};

struct OpDef {
  const char* name = nullptr;
  OpKind kind = OpKind::Compute;
  int8_t min_inputs = 1, max_inputs = 1;  // max -1: variadic
  uint32_t mutates = 0;                   // bit i: input i is written by the kernel
  /// Variadic in-place ops (optimizer updates over all parameters): how many leading inputs
  /// they write.
  int (*mutated_prefix)(int num_inputs, const Attrs& attrs) = nullptr;
  uint32_t nondiff = 0;  // bit i: input i never receives a gradient
  Save save = Save::None;
  bool mixed_devices = false;      // inputs may live on different devices (to_device)
  bool contiguous_inputs = false;  // the dispatcher hands the kernel contiguous inputs
  /// A backend's fast path (cuDNN's or oneDNN's RNN) runs on these DeviceTypes only (bit per
  /// type) and has kernels there alone; 0: an ordinary op, on every backend.
  uint8_t backends = 0;
  /// The op acts outside the process (a collective, I/O): it runs exactly once per call of
  /// the code that calls it, eager or traced, on every rank, and never in a run the runtime
  /// makes on its own (bucket probes, retrace-warning probes, any second pass). See "Effects"
  /// in docs/ARCHITECTURE.md.
  bool external_effect = false;
  /// For an external-effect op: the local op a probe runs in its place (same inputs, attributes,
  /// output shapes and dtypes; an all-reduce's is the identity, the value of a group of one).
  /// Null: a graph containing the op is never probed (its bucket is refused, naming the op).
  const OpDef& (*stand_in)() = nullptr;
  LayoutRole layout = LayoutRole::None;
  /// A fused whole-sequence recurrence of this cell (`backends` says where it runs).
  RecurrentCell fused_cell = RecurrentCell::None;
  const AttrType* attrs = nullptr;  // &attrs_of<...>; null: the op takes none
  InferFn infer = nullptr;
  BackwardFn backward = nullptr;      // null: not differentiable
  AccumulateFn accumulate = nullptr;  // the backward of a part-view, in place (see AccumulateFn)
  Kernel cpu = {};
  /// The public function (Python-style, see ops/signature.h); null for internal ops.
  const char* signature = nullptr;
  InvokeFn invoke = nullptr;
  bool method = false;        // also a Tensor method: its first parameter is the tensor
  const char* doc = nullptr;  // the Python docstring after the signature line
  /// The op's test cases: its typical call first, then edge cases (strides, asymmetric padding,
  /// an empty batch, broadcasting); every check of the table runs each.
  std::vector<Example> examples = {};

  // Filled in by the registry.
  std::array<Kernel, kNumDeviceTypes> kernels = {};  // per DeviceType; [CPU] is `cpu`
  uint16_t id = 0;

  bool differentiable() const { return backward != nullptr; }
  bool writes(int input, int num_inputs, const Attrs& attrs) const {
    return mutated_prefix ? input < mutated_prefix(num_inputs, attrs) : input_bit(mutates, input);
  }
  bool never_differentiated(size_t input) const { return input_bit(nondiff, input); }
  bool runs_on(DeviceType t) const {
    return backends == 0 || (backends >> static_cast<int>(t) & 1u);
  }
};

}  // namespace encore
