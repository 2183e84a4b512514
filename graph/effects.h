// The effects rule (docs/ARCHITECTURE.md, "Effects"). An op whose row says `external_effect`
// (a collective, I/O) acts outside the process: it runs exactly once per call of the code that
// calls it, eager or traced, on every rank, and never in a run the runtime makes on its own.
// The graph layer keeps the rule in three places:
//  - passes never remove such a node (its effect is observable even when its outputs are not);
//  - probe runs (a bucket's exactness probes, the retrace warning's probe) replace each such node
//    by its row's `stand_in`, a local op of the same shapes (an all-reduce's is the identity),
//    and a graph with such a node and no stand-in is not probed: its bucket is refused, naming
//    the op;
//  - before a cached graph with such nodes first replays, the registered AgreementCheck is called
//    once with a hash of what was traced (the function, its signature and the sequence of effect
//    nodes with their attributes and shapes), so that ranks that traced different things fail
//    with an error instead of waiting for each other forever.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "graph/graph.h"

namespace encore::graph {

/// Checks that every process running this program traced the same graph: called with the same
/// arguments on every rank that is in step. Throws an encore::Error (naming both sides where it
/// can) when the ranks disagree; returning means they agree. It runs inside the traced call,
/// under the process-wide lock of traced calls, before the graph's first replay.
using AgreementCheck = void (*)(uint64_t graph_hash, std::string_view description);

/// Installs the check (default: dist::check_agreement, which compares the hash across the world;
/// null: none). Returns the previous one.
AgreementCheck set_agreement_check(AgreementCheck check);
AgreementCheck agreement_check();

/// Whether some node of `g` runs an op with an external effect.
bool has_external_effects(const Graph& g);

/// What the ranks compare: a 64-bit FNV-1a hash of `description`, which names the traced function
/// and its signature and lists every external-effect node in graph order (op, attributes, input
/// and output shapes and dtypes). Lengths of a bucket are data, not part of it.
struct EffectsDigest {
  uint64_t hash = 0;
  std::string description;
};
EffectsDigest effects_digest(const Graph& g, std::string_view function, std::string_view signature);

/// Replaces every external-effect node of `g` by its row's stand-in, for a run that the runtime
/// makes on its own. Throws UnsupportedError naming the op and `why` (what the run is for) when a
/// row declares none, or when the stand-in's outputs differ in shape or dtype from the op's.
void use_stand_ins(Graph& g, std::string_view why);

/// FNV-1a, 64 bits: the same on every platform and in every process.
uint64_t fnv1a(std::string_view text);

}  // namespace encore::graph
