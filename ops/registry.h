// The registry of ops: every row defined by an op family (ops/defs/*.cpp) and the kernels
// other backends register by op name. Kernels see raw `TensorRef`s (pointer + geometry), never
// Tensors, so a Plan can call the same kernels on pre-bound arena addresses.
#pragma once

#include <span>
#include <string_view>

#include "ops/op.h"
#include "ops/signature.h"

namespace encore {

/// Adds a row to the registry and returns it (stable for the process). Families call it from
/// their files' static initializers: `OpDef& relu_op = define_op({...});`.
OpDef& define_op(OpDef&& def);
/// Registers `backend`'s kernel for the op named `op`; the op may be defined before or after.
/// Returns true, so a backend file can register from a static initializer.
bool register_kernel(const char* op, DeviceType backend, Kernel kernel);

/// The op named `name`; an UnsupportedError when this build has none (a CUDA-only op without
/// the CUDA backend, whose plugin defines it: core/backend.h).
const OpDef& op(std::string_view name);
/// The op named `name`, or null.
const OpDef* find_op(std::string_view name);
/// Every op, in registration order (tests cover each; bindings expose the public ones), the
/// CUDA plugin's included when it loads.
std::span<OpDef* const> all_ops();
/// The ops defined so far, without loading the CUDA plugin: libencore's own, which include every
/// op with a public function (the plugin's ops have none). The bindings list their functions
/// from these, so `import encore` loads no CUDA library; _ops.py, generated from all_ops(),
/// imports each public function from _C and would fail to import if the plugin added one.
std::span<OpDef* const> defined_ops();
/// The parsed signature of an op with a public function.
const Signature& signature_of(const OpDef& def);
/// The fused whole-sequence recurrence of `cell` that runs on devices of `type` (cudnn_lstm on
/// CUDA, onednn_lstm on the CPU), or null where there is none.
const OpDef* fused_recurrence_op(RecurrentCell cell, DeviceType type);
/// Backend kernels registered for a name no op has (a typo, or an op missing from this build).
std::vector<std::string> orphan_kernels();

}  // namespace encore
