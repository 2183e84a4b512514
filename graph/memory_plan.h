// Static memory planning: liveness of every internal buffer over the node sequence, then a
// best-fit offset assignment into one arena per device, so that a replay allocates nothing.
#pragma once

#include <vector>

#include "graph/graph.h"

namespace encore::graph {

struct MemoryPlan {
  static constexpr size_t kUnplaced = static_cast<size_t>(-1);
  std::vector<size_t> offset;  // per buffer: byte offset in its device's arena, or kUnplaced
  std::vector<std::pair<Device, size_t>> arenas;  // bytes per device
  size_t arena_bytes = 0;                         // all arenas
  size_t intermediate_bytes = 0;  // sum of every planned buffer: what allocating each costs
  size_t peak_live_bytes = 0;     // most bytes live at once: the floor any allocator needs

  /// Plans internal buffers, and input buffers when `inputs_in_arena` (CUDA: inputs are
  /// copied into static slots the captured graph reads).
  static MemoryPlan build(const Graph& g, bool inputs_in_arena);
};

}  // namespace encore::graph
