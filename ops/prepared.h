// Per-shape kernel state — a oneDNN primitive, a cuDNN algorithm choice with its descriptors
// and workspace, a cuDNN or oneDNN RNN setup — prepared once per (op, device, input and output
// geometry, attributes, math mode, thread count, autotune generation, and on CUDA its user: see
// StateUser) by the kernel's PrepareFn
// and kept in one cache owned by the dispatcher. Eager dispatch and Plan building both get it
// from here, so a kernel always receives its prepared state and an eager call and its replay
// run literally the same code.
//
// The cache is bounded in bytes: each entry counts what the heap (and, for a CUDA state, the
// device memory encore allocates) grew by while it was made — JIT code, primitive descriptors,
// packed weights, workspaces (its op's mean measured size where the heap is too fragmented to
// measure cheaply). Least recently used entries are evicted past the limit (counted
// in the ledger, which also shows the bytes and entries held); a Plan holds its states by
// reference, so eviction never takes state from under a replay. release_cached_memory()
// empties it.
#pragma once

#include <cstddef>
#include <memory>
#include <span>

#include "ops/registry.h"

namespace encore {

/// Who runs the kernel with a state. CUDA kernels keep scratch memory in theirs (cuDNN's
/// workspace, a convolution's reordered filter, an RNN's packed weights), which two callers
/// whose work interleaves on the compute stream would overwrite for each other: on CUDA each
/// thread's eager calls get states of their own, and the captured graphs share one (a replay
/// is one launch, never interleaved with other work). CPU states serve every caller.
enum class StateUser { Eager, Graph };

/// The prepared state of `def`'s kernel on `device` for the call `ctx` describes (its data
/// pointers are not part of the key); null when the kernel needs none.
std::shared_ptr<void> prepared_state(const OpDef& def, Device device, const KernelCtx& ctx,
                                     StateUser user = StateUser::Eager);

/// A per-shape setup that shape inference needs before any kernel runs (an RNN setup: its
/// workspace, an output, has the size the setup says): made by `make` (given `tensors` as its
/// inputs, no outputs, and `attrs`) once per (def, device, the geometry of `tensors`, attrs)
/// and kept in the same cache as the kernels' states, so that it is bounded, swapped and
/// released with them. A kernel's PrepareFn may call it for the setup its state shares.
std::shared_ptr<void> prepared_setup(const OpDef& def, Device device,
                                     std::span<const TensorRef> tensors, const Attrs& attrs,
                                     PrepareFn make);

/// The most bytes the cache's entries may hold (default 256 MiB; 0 keeps nothing: every eager
/// call prepares again). Lowering it evicts at once.
void set_prepared_limit(size_t bytes);
size_t prepared_limit();
/// Bytes and entries the cache holds now.
size_t prepared_bytes();
size_t prepared_size();
/// Forgets every entry (Plans keep theirs): the next call of each shape prepares again.
void clear_prepared();

/// The process's per-shape state: the dispatcher's cache and the autotune store
/// (ops/autotune.h). compare_modes gives each mode its own, so that no mode finds a shape
/// another mode set up.
struct PerShapeState {
  std::shared_ptr<void> prepared, choices;  // null: empty
};
/// Installs `state` (by default: empty) and returns the one it replaces. The choices are not
/// a new autotune generation: states prepared under them stay valid.
PerShapeState swap_per_shape_state(PerShapeState state = {});

}  // namespace encore
