#include "graph/passes.h"

#include <algorithm>
#include <vector>

#include "ops/dispatch.h"

namespace encore::graph {

namespace {

bool writes(const Node& n, size_t k) {
  return n.op->writes(static_cast<int>(k), static_cast<int>(n.in.size()), n.attrs);
}

bool observable(const Buffer& b) { return b.kind != BufferKind::Internal; }

bool whole(const Graph& g, const Value& v) {
  return v.offset == 0 && v.strides == contiguous_strides(v.shape) &&
         v.shape.numel() * itemsize(v.dtype) == g.buffers[v.buffer].nbytes;
}

}  // namespace

int eliminate_dead_code(Graph& g) {
  // Inputs and captured buffers are seen by the caller, like the outputs: a node writing one
  // (an optimizer update, a gradient redirected into a parameter's .grad by copy elision, a
  // user's copy_ into captured state) is never dead.
  std::vector<bool> live(g.buffers.size(), false);
  for (size_t b = 0; b < g.buffers.size(); ++b) live[b] = observable(g.buffers[b]);
  for (const Value& v : g.outputs) live[v.buffer] = true;
  std::vector<bool> keep(g.nodes.size(), false);
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const Node& n = g.nodes[i];
    bool needed = n.op->external_effect;  // its effect is observable (graph/effects.h)
    for (const Value& v : n.out) needed |= live[v.buffer];
    for (size_t k = 0; k < n.in.size(); ++k)
      if (writes(n, k)) needed |= live[n.in[k].buffer];
    if (!needed) continue;
    keep[i] = true;
    for (const Value& v : n.in) live[v.buffer] = true;
  }
  std::vector<Node> kept;
  kept.reserve(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (keep[i]) kept.push_back(std::move(g.nodes[i]));
  const int removed = static_cast<int>(g.nodes.size() - kept.size());
  g.nodes = std::move(kept);
  return removed;
}

int elide_copies_into_captured(Graph& g) {
  int elided = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& copy = g.nodes[i];
    if (copy.op != &copy_inplace_op_def() || !whole(g, copy.in[0]) || !whole(g, copy.in[1]))
      continue;
    const uint32_t dst = copy.in[0].buffer, src = copy.in[1].buffer;
    if (g.buffers[dst].kind != BufferKind::External ||
        g.buffers[src].kind != BufferKind::Internal ||
        g.buffers[src].nbytes != g.buffers[dst].nbytes || copy.in[0].dtype != copy.in[1].dtype)
      continue;
    // The producer: the first node with src as a whole output.
    size_t producer = g.nodes.size();
    for (size_t j = 0; j < i && producer == g.nodes.size(); ++j)
      for (const Value& v : g.nodes[j].out)
        if (v.buffer == src && whole(g, v)) producer = j;
    if (producer == g.nodes.size()) continue;
    // The producer writing dst while it reads dst (p.copy_(p @ w)) would read what it writes.
    bool clear = true;
    for (const Value& v : g.nodes[producer].in) clear &= v.buffer != dst;
    for (const Value& v : g.outputs) clear &= v.buffer != src;
    for (size_t j = 0; j < g.nodes.size() && clear; ++j) {
      if (j == i || j == producer) continue;
      for (const Value& v : g.nodes[j].in) {
        // dst untouched from the producer to the copy; src unread after the copy.
        if (v.buffer == dst && j > producer && j < i) clear = false;
        if (v.buffer == src && j > i) clear = false;
      }
      for (const Value& v : g.nodes[j].out) {
        if (v.buffer == src && j != producer) clear = false;
        if (v.buffer == dst && j > producer && j < i) clear = false;
      }
    }
    if (!clear) continue;
    // Redirect every use of src (the producer's output and reads before the copy) to dst.
    for (size_t j = producer; j < i; ++j) {
      for (Value& v : g.nodes[j].in)
        if (v.buffer == src) v.buffer = dst;
      for (Value& v : g.nodes[j].out)
        if (v.buffer == src) v.buffer = dst;
    }
    g.nodes.erase(g.nodes.begin() + static_cast<std::ptrdiff_t>(i));
    --i;
    ++elided;
  }
  return elided;
}

int remove_layout_round_trips(Graph& g) {
  const auto is = [](const Node& n, LayoutRole role) { return n.op->layout == role; };
  const auto producer_of = [&](uint32_t buffer, size_t before) -> const Node* {
    for (size_t j = before; j-- > 0;)
      for (const Value& v : g.nodes[j].out)
        if (v.buffer == buffer) return whole(g, v) ? &g.nodes[j] : nullptr;
    return nullptr;
  };
  std::vector<bool> written_in_place(g.buffers.size(), false), returned(g.buffers.size(), false);
  for (const Node& n : g.nodes)
    for (size_t k = 0; k < n.in.size(); ++k)
      if (writes(n, k)) written_in_place[n.in[k].buffer] = true;
  for (const Value& v : g.outputs) returned[v.buffer] = true;
  int removed = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& to = g.nodes[i];
    if (!is(to, LayoutRole::ToBlocked) || !whole(g, to.in[0]) || !whole(g, to.out[0])) continue;
    const Node* from = producer_of(to.in[0].buffer, i);
    if (!from || !is(*from, LayoutRole::FromBlocked) || !whole(g, from->in[0]) ||
        from->in[0].shape != to.out[0].shape || from->in[0].dtype != to.out[0].dtype)
      continue;
    const Value u = from->in[0];
    const uint32_t t = to.out[0].buffer;
    const Node* conv = producer_of(u.buffer, i);
    if (!conv || !(is(*conv, LayoutRole::Convolution) || is(*conv, LayoutRole::ToBlocked)) ||
        written_in_place[u.buffer] || written_in_place[t] || returned[t] ||
        g.buffers[t].kind != BufferKind::Internal)
      continue;
    for (Node& n : g.nodes)
      for (Value& v : n.in)
        if (v.buffer == t) v = Value{u.buffer, v.offset, v.shape, v.strides, v.dtype};
    g.nodes.erase(g.nodes.begin() + static_cast<std::ptrdiff_t>(i));
    --i;
    ++removed;
  }
  return removed;
}

void restore_written_constants(Graph& g) {
  std::vector<Node> restores;
  const size_t n = g.buffers.size();
  for (uint32_t b = 0; b < n; ++b) {
    Buffer& buf = g.buffers[b];
    if (buf.kind != BufferKind::External || !buf.written) continue;
    const bool owned = std::any_of(buf.owners.begin(), buf.owners.end(),
                                   [](const Owner& o) { return !o.tensor.expired(); });
    if (owned || buf.nbytes == 0) continue;
    // Byte-for-byte: a view of whole 4-byte words (every dtype's size is a multiple of 4).
    const Shape words{static_cast<int64_t>(buf.nbytes / 4)};
    const Tensor live =
        Tensor::make_view(buf.storage, words, contiguous_strides(words), 0, DType::Int32);
    const Tensor snapshot = live.clone();
    Buffer snap;
    snap.kind = BufferKind::External;
    snap.nbytes = buf.nbytes;
    snap.device = buf.device;
    snap.storage = snapshot.storage();
    snap.label = buf.label + ".initial";
    const Value dst{b, 0, words, contiguous_strides(words), DType::Int32};
    const Value src{static_cast<uint32_t>(g.buffers.size()), 0, words, contiguous_strides(words),
                    DType::Int32};
    g.buffers.push_back(std::move(snap));
    restores.push_back({&copy_inplace_op_def(), {}, {dst, src}, {}});
  }
  g.nodes.insert(g.nodes.begin(), restores.begin(), restores.end());
}

PassStats run_passes(Graph& g) {
  PassStats s;
  s.layout_round_trips_removed = remove_layout_round_trips(g);
  s.copies_elided = elide_copies_into_captured(g);
  s.dead_nodes_removed = eliminate_dead_code(g);
  return s;
}

}  // namespace encore::graph
