#include "graph/memory_plan.h"

#include <algorithm>

namespace encore::graph {

namespace {

// CUDA kernels vectorize 16-byte loads; cuDNN/cuBLAS like 256-byte alignment.
size_t alignment(Device d) { return d.is_cuda() ? 256 : 64; }
size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

struct Interval {
  uint32_t buffer;
  int first, last;
  size_t bytes;
};

}  // namespace

MemoryPlan MemoryPlan::build(const Graph& g, bool inputs_in_arena) {
  MemoryPlan p;
  p.offset.assign(g.buffers.size(), kUnplaced);
  const int end = static_cast<int>(g.nodes.size());
  std::vector<int> first(g.buffers.size(), -1), last(g.buffers.size(), -1);
  auto touch = [&](uint32_t b, int t) {
    if (first[b] < 0) first[b] = t;
    last[b] = std::max(last[b], t);
  };
  for (int t = 0; t < end; ++t) {
    for (const Value& v : g.nodes[t].in) touch(v.buffer, t);
    for (const Value& v : g.nodes[t].out) touch(v.buffer, t);
  }
  for (const Value& v : g.outputs) touch(v.buffer, end);
  // A written input is copied back to the caller's tensor after the last step.
  for (uint32_t b = 0; b < g.buffers.size(); ++b)
    if (g.buffers[b].kind == BufferKind::Input && g.buffers[b].written && first[b] >= 0)
      touch(b, end);
  std::vector<Interval> todo;
  for (uint32_t b = 0; b < g.buffers.size(); ++b) {
    const Buffer& buf = g.buffers[b];
    const bool planned =
        buf.kind == BufferKind::Internal || (inputs_in_arena && buf.kind == BufferKind::Input);
    if (!planned || first[b] < 0) continue;
    // Inputs are written before the first step; outputs are read after the last.
    const int lo = buf.kind == BufferKind::Input ? -1 : first[b];
    todo.push_back(
        {b, lo, last[b], align_up(std::max<size_t>(buf.nbytes, 1), alignment(buf.device))});
    p.intermediate_bytes += buf.nbytes;
  }
  // Peak live bytes: a sweep over time.
  for (int t = -1; t <= end; ++t) {
    size_t live = 0;
    for (const Interval& iv : todo)
      if (iv.first <= t && t <= iv.last) live += g.buffers[iv.buffer].nbytes;
    p.peak_live_bytes = std::max(p.peak_live_bytes, live);
  }
  // Best fit, largest first: each buffer takes the smallest gap among the buffers it
  // overlaps in time, or goes on top.
  std::stable_sort(todo.begin(), todo.end(),
                   [](const Interval& a, const Interval& b) { return a.bytes > b.bytes; });
  std::vector<const Interval*> placed;
  for (const Interval& iv : todo) {
    const Device dev = g.buffers[iv.buffer].device;
    std::vector<std::pair<size_t, size_t>> busy;  // [offset, end) of overlapping placements
    for (const Interval* q : placed)
      if (g.buffers[q->buffer].device == dev && q->first <= iv.last && iv.first <= q->last)
        busy.emplace_back(p.offset[q->buffer], p.offset[q->buffer] + q->bytes);
    std::sort(busy.begin(), busy.end());
    size_t best = MemoryPlan::kUnplaced, best_gap = MemoryPlan::kUnplaced, cursor = 0;
    for (const auto& [lo, hi] : busy) {
      if (lo > cursor && lo - cursor >= iv.bytes && lo - cursor < best_gap) {
        best = cursor;
        best_gap = lo - cursor;
      }
      cursor = std::max(cursor, hi);
    }
    p.offset[iv.buffer] = best != MemoryPlan::kUnplaced ? best : cursor;
    placed.push_back(&iv);
    auto it = std::find_if(p.arenas.begin(), p.arenas.end(),
                           [&](const auto& a) { return a.first == dev; });
    if (it == p.arenas.end()) it = p.arenas.insert(p.arenas.end(), {dev, 0});
    it->second = std::max(it->second, p.offset[iv.buffer] + iv.bytes);
  }
  for (const auto& [dev, bytes] : p.arenas) p.arena_bytes += bytes;
  return p;
}

}  // namespace encore::graph
