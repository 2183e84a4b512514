// What the dispatcher knows about each op: arity, shape inference, backward formula, and one
// kernel per backend. Kernels see raw `TensorRef`s (pointer + geometry), never Tensors, so a
// Plan can call the same kernels on pre-bound arena addresses.
#pragma once

#include <array>
#include <memory>
#include <span>

#include "core/tensor.h"
#include "ops/attrs.h"
#include "ops/op_list.h"

namespace encore {

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
  bool contiguous() const;
  template <class T> T* ptr() const { return static_cast<T*>(data); }
};

struct KernelCtx {
  std::span<const TensorRef> in;
  std::span<const TensorRef> out;
  const Attrs& attrs;
  /// What `prepare` returned when a Plan was built (e.g. a oneDNN primitive); null in eager,
  /// where kernels look their per-shape state up in a cache instead.
  void* state = nullptr;
};

struct BackwardCtx {
  std::span<const Tensor> inputs;   // saved inputs (undefined unless the op saves them)
  std::span<const Tensor> outputs;  // saved outputs (undefined unless the op saves them)
  std::span<const Tensor> grads;    // gradient per output; undefined means zero (multi-output
                                    // ops materialize what their formula needs)
  std::span<const TensorMeta> input_metas;  // shape, dtype and device of every input
  const Attrs& attrs;
  uint32_t needs;  // bit i: input i needs a gradient
  bool need(int i) const { return needs >> i & 1u; }
  const Shape& input_shape(int i) const { return input_metas[i].shape; }
};

using InferFn = int (*)(std::span<const Tensor> in, const Attrs& attrs, TensorMeta* out);
using KernelFn = void (*)(const KernelCtx& ctx);
using PrepareFn = std::shared_ptr<void> (*)(const KernelCtx& ctx);
/// Writes the gradient of each input into `grad_in` (left undefined where not needed),
/// using ordinary ops so that a traced step records its own backward pass.
using BackwardFn = void (*)(const BackwardCtx& ctx, Tensor* grad_in);

enum class OpKind : uint8_t {
  Compute,  // allocates outputs, runs a kernel
  View,     // output shares the input's storage; no kernel
  InPlace,  // writes its first input(s); no outputs
};

struct OpDef {
  const char* name = nullptr;
  OpKind kind = OpKind::Compute;
  int8_t min_inputs = 1, max_inputs = 1;  // max -1: variadic
  uint32_t mutates = 0;   // bit i: input i is written by the kernel
  /// Variadic in-place ops (optimizer updates over all parameters): how many leading inputs
  /// they write.
  int (*mutated_prefix)(int num_inputs, const Attrs& attrs) = nullptr;
  uint32_t nondiff = 0;   // bit i: input i never receives a gradient
  bool save_inputs = false;
  bool save_outputs = false;
  bool mixed_devices = false;  // inputs may live on different devices (to_device)
  bool contiguous_inputs = false;  // the dispatcher hands the kernel contiguous inputs
  InferFn infer = nullptr;
  BackwardFn backward = nullptr;  // null: not differentiable
  std::array<KernelFn, kNumDeviceTypes> kernel{};
  std::array<PrepareFn, kNumDeviceTypes> prepare{};

  bool differentiable() const { return backward != nullptr; }
  bool writes(int input, int num_inputs, const Attrs& attrs) const {
    return mutated_prefix ? input < mutated_prefix(num_inputs, attrs) : (mutates >> input & 1u);
  }
};

const OpDef& op_def(OpId op);
/// For the definition and registration functions of each op family (ops/defs, ops/cpu, ops/cuda).
OpDef& mutable_op_def(OpId op);
const char* op_name(OpId op);
/// All ops, for tests that must cover every one (gradcheck, backend parity).
std::span<const OpDef> all_op_defs();
OpId op_id(const OpDef& def);

}  // namespace encore
