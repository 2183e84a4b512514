// Per-shape kernel state — a oneDNN primitive, a cuDNN algorithm choice with its descriptors
// and workspace, a cuDNN RNN setup — prepared once per (op, device, input and output
// geometry, attributes, math mode, autotune generation) by the kernel's PrepareFn and kept in one bounded cache owned by the
// dispatcher. Eager dispatch and Plan building both get it from here, so a kernel always
// receives its prepared state and an eager call and its replay run literally the same code.
//
// Least recently used entries are evicted past the capacity (counted in the ledger); a Plan
// holds its states by reference, so eviction never takes state from under a replay.
#pragma once

#include <cstddef>
#include <memory>

#include "ops/registry.h"

namespace encore {

/// The prepared state of `def`'s kernel on `device` for the call `ctx` describes (its data
/// pointers are not part of the key); null when the kernel needs none.
std::shared_ptr<void> prepared_state(const OpDef& def, Device device, const KernelCtx& ctx);

/// Entries kept (default 512); shrinking evicts at once.
void set_prepared_capacity(size_t entries);
size_t prepared_capacity();
size_t prepared_size();
/// Forgets every entry (Plans keep theirs): the next call of each shape prepares again.
void clear_prepared();

}  // namespace encore
