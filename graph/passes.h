// Graph passes. Each one preserves results exactly (same kernels, same order for the nodes
// that remain); they only remove work.
#pragma once

#include "graph/graph.h"

namespace encore::graph {

struct PassStats {
  int dead_nodes_removed = 0;
  int copies_elided = 0;
  int layout_round_trips_removed = 0;
};

/// Removes nodes whose results are never observed: not returned, not read by a kept node,
/// and not written into a captured tensor or an input.
int eliminate_dead_code(Graph& g);

/// A full copy of an internal buffer into a captured one (a traced step's gradient going
/// into the parameter's .grad buffer) is removed by letting the producer write the captured
/// buffer directly, when nothing else touches either buffer in between or afterwards.
int elide_copies_into_captured(Graph& g);

/// to_blocked(from_blocked(u)) with u's block is u: between two convolutions in oneDNN's
/// blocked layout (ops/conv.h, Conv1dLayout::Blocked) the to_blocked node is removed and its
/// readers read u, so consecutive convolutions stay blocked; the from_blocked node goes too
/// (dead code) unless something else reads the channels-last value. Only where u comes from a
/// convolution (whose blocked outputs oneDNN writes with a zero channel tail) or a to_blocked,
/// and neither buffer is written in place.
int remove_layout_round_trips(Graph& g);

PassStats run_passes(Graph& g);

/// Not an optimization: what every recorded graph needs before it runs. A tensor made while
/// tracing without an op (a constant from host data) belongs to the graph; if the graph writes
/// it, each run must start from its value at trace time, as each eager call starts from a fresh
/// constant: this puts a restore from a snapshot at the front.
void restore_written_constants(Graph& g);

}  // namespace encore::graph
