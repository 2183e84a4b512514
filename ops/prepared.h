// Per-shape kernel state — a oneDNN primitive, a cuDNN algorithm choice with its descriptors
// and workspace, a cuDNN RNN setup — prepared once per (op, device, input and output
// geometry, attributes, math mode, autotune generation, and on CUDA its user: see StateUser)
// by the kernel's PrepareFn and kept in one bounded cache owned by the dispatcher. Eager dispatch
// and Plan building both get it from here, so a kernel always receives its prepared state and an
// eager call and its replay run literally the same code.
//
// Least recently used entries are evicted past the capacity (counted in the ledger); a Plan
// holds its states by reference, so eviction never takes state from under a replay.
#pragma once

#include <cstddef>
#include <memory>

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

/// Entries kept (default 512); shrinking evicts at once.
void set_prepared_capacity(size_t entries);
size_t prepared_capacity();
size_t prepared_size();
/// Forgets every entry (Plans keep theirs): the next call of each shape prepares again.
void clear_prepared();

}  // namespace encore
