// Per-shape algorithm choices: which cuDNN algorithm each convolution shape runs on the GPU,
// and which oneDNN implementation each shape got on the CPU. Choosing costs time the first
// time a shape is seen (problem 1 of docs/ARCHITECTURE.md), and small configuration changes
// can change the choice and the run time (problem 2): both are made visible here, counted in
// the ledger (autotunes = searches, autotune_time, autotune_hits), and the choices can be
// saved to a file so that a second process does not pay again.
//
// Searching never happens inside a replay or a CUDA Graph capture: a traced step searches
// while its Plan is built (the kernels' PrepareFn), eager calls on first use of a shape.
#pragma once

#include "core/cxx20.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace encore::autotune {

enum class Policy {
  Heuristic,   // the library's first choice (cudnnGet*_v7; oneDNN's first implementation);
               // nothing is timed. The default.
  Exhaustive,  // every applicable algorithm is timed once per shape (cudnnFind*Ex; every
               // implementation oneDNN offers but its reference ones, one call each) and the
               // fastest kept
  Off,         // a fixed default algorithm for every shape (CPU: the GEMM-based convolution)
};

/// Applies to shapes seen from now on; choices made under another policy are not reused
/// (except that exhaustive choices also serve the heuristic policy).
void set_policy(Policy p);
Policy policy();
std::string_view name(Policy p);
/// "heuristic", "exhaustive" or "off"; throws ValueError otherwise.
Policy parse_policy(const std::string& s);

struct Entry {
  std::string op;         // "conv1d", "conv1d_backward_data" or "conv1d_backward_filter"
  std::string key;        // the problem: shapes, stride, dilation, padding, dtype, math, GPU model
  std::string algorithm;  // cuDNN: e.g. "IMPLICIT_PRECOMP_GEMM"; CPU: oneDNN's implementation
  double time_ms = -1;    // time measured by the exhaustive search; -1 when nothing was timed
  size_t workspace_bytes = 0;
  std::string backend;  // "cudnn" or "onednn"
  std::string source;   // the policy that chose it: "heuristic", "exhaustive" or "off"
  std::string math;  // cuDNN math type: "fma" without TF32, "default"/"tensor_op" with; CPU: empty
  bool from_file = false;  // loaded with load() rather than chosen in this process
  /// CPU, exhaustive: every implementation timed (name, ms), the chosen one among them; not saved.
  std::vector<std::pair<std::string, double>> timings = {};
};

/// Every choice made or loaded so far: the GPU's (cuDNN) and the CPU's (oneDNN).
std::vector<Entry> entries();
/// Writes the choices to `path` (a small text file, one choice per line), atomically
/// (core/file.h; FileError when it cannot be written).
void save(const std::string& path);
/// Adds the choices saved in `path`. Throws FileError if it cannot be read, ValueError if the
/// file is malformed or was written with another cuDNN version (algorithm choices do not carry over
/// between versions). A CPU choice naming an implementation this machine's oneDNN does not offer is
/// searched again.
void load(const std::string& path);
/// Forgets every choice (the next use of each shape searches again).
void clear();

/// For the backends (ops/cuda/conv1d.cpp).
namespace detail {
/// The stored choice for (op, key) that `policy()` may reuse, if any.
std::optional<Entry> find(const std::string& op, const std::string& key);
void store(Entry e);
/// Installs `choices` (null: none; an object swap_choices returned, moved from) and returns the
/// choices it replaces (ops/prepared.h: swap_per_shape_state). Not a new generation.
std::shared_ptr<void> swap_choices(std::shared_ptr<void> choices);
/// A backend's PrepareFn calls this when a stored choice spared the search: the dispatcher's
/// cache then counts the setup as a hit (AutotuneHits), not a search (Autotunes).
void note_reused();
/// Whether note_reused() was called on this thread since the last take_reused(); resets it.
bool take_reused();
/// Bumped by set_policy, load and clear: backends revalidate choices they cached.
uint64_t generation();
/// cudnnGetVersion() of the CUDA backend (0: no CUDA backend in this build).
size_t backend_version();
}  // namespace detail

}  // namespace encore::autotune
