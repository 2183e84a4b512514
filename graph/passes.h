// Graph passes. Each one preserves results exactly (same kernels, same order for the nodes
// that remain); they only remove work.
#pragma once

#include "graph/graph.h"

namespace encore::graph {

struct PassStats {
  int dead_nodes_removed = 0;
  int copies_elided = 0;
};

/// Removes nodes whose results are never observed: not returned, not read by a kept node,
/// and not written into a captured tensor or an input.
int eliminate_dead_code(Graph& g);

/// A full copy of an internal buffer into a captured one (a traced step's gradient going
/// into the parameter's .grad buffer) is removed by letting the producer write the captured
/// buffer directly, when nothing else touches either buffer in between or afterwards.
int elide_copies_into_captured(Graph& g);

PassStats run_passes(Graph& g);

}  // namespace encore::graph
