// Tape recording and the reverse-mode engine. Backward formulas call ordinary ops, so
// inside a trace the whole backward pass lands in the graph like the forward did.
#include <atomic>
#include <queue>
#include <unordered_map>

#include "autograd/hooks.h"
#include "autograd/node.h"
#include "core/modes.h"
#include "ops/dispatch.h"
#include "ops/ops.h"
#include "ops/sigmoid_origin.h"

namespace encore::autograd {

namespace {

std::atomic<uint64_t> g_next_seq{0};

TensorMeta meta_of(const Tensor& t) { return {t.shape(), {}, 0, t.dtype(), t.device()}; }

void check_saved(const Node& node, const Tensor& t, uint32_t version) {
  ENCORE_CHECK(!t.defined() || t.storage()->version() == version, ValueError,
               "[backward] a tensor ", describe(t), " saved by ", node.op->name,
               " for the backward pass was modified in place after it was saved");
}

// Adds gradient `g` into leaf `impl`: in place into an existing .grad, else `g` becomes the
// .grad (copied when shared or strided). Inside a trace the same code records the add, or
// leaves a symbolic .grad that the graph layer gives a persistent buffer when the trace ends.
void accumulate_leaf(const std::shared_ptr<TensorImpl>& impl, Tensor g) {
  Tensor leaf(impl);
  const Tensor grad = leaf.grad();
  if (grad.defined()) {
    Tensor(grad).add_(g);
    return;
  }
  const bool sole_owner = g.impl_ptr().use_count() == 1 && g.storage().use_count() == 1;
  if (!sole_owner || !g.is_contiguous() || g.offset() != 0) g = g.clone();
  leaf.set_grad(g);
}

// A part-view's gradient (OpDef::accumulate) goes in place into a full-size buffer the engine
// owns: the pending gradient of the node output it came from (made a zeros buffer, or a copy of
// a gradient that arrived as it was produced), or, for a leaf, a buffer of its parts that
// goes into .grad once, when the pass ends (a leaf's .grad may be a traced function's captured
// buffer, written as a whole).
void accumulate_part(const Node& node, const BackwardCtx& ctx, Tensor& buffer, bool& owned) {
  const TensorMeta& m = node.input_metas[0];
  if (!owned) buffer = buffer.defined() ? buffer.clone() : zeros(m.shape, m.dtype, m.device);
  owned = true;
  node.op->accumulate(ctx, buffer);
}

// A reachable node during backward: how many edges into it are still to run, and the
// gradients of its outputs gathered so far. `owned` marks the buffers the engine made itself
// (sums, accumulate_part's), which it may add into in place.
struct Pending {
  int deps = 0;
  std::array<Tensor, kMaxOutputs> grads;
  std::array<bool, kMaxOutputs> owned{};
};

// Leaves' part buffers, in the order they were first reached (deterministic).
struct LeafParts {
  std::vector<std::pair<std::shared_ptr<TensorImpl>, Tensor>> parts;
  std::unordered_map<TensorImpl*, size_t> index;
  Tensor& of(const std::shared_ptr<TensorImpl>& leaf) {
    auto [it, inserted] = index.try_emplace(leaf.get(), parts.size());
    if (inserted) parts.emplace_back(leaf, Tensor());
    return parts[it->second].second;
  }
};

// Moves into `out` the nodes that `node` alone keeps alive, through its edges and through the
// tensors it saved (a saved input's grad_fn, and the logits behind a saved sigmoid).
void take_sole_owned(Node& node, std::vector<std::shared_ptr<Node>>& out) {
  auto take = [&](std::shared_ptr<Node>& p) {
    if (p && p.use_count() == 1) out.push_back(std::move(p));
  };
  for (Edge& e : node.next) take(e.node);
  for (const Tensor& saved : node.saved_inputs) {
    for (const std::shared_ptr<TensorImpl>* impl = &saved.impl_ptr();
         *impl && impl->use_count() == 1;) {
      take((*impl)->grad_fn);
      const SigmoidOrigin* origin = sigmoid_origin(**impl);
      if (!origin) break;
      impl = &origin->logits;
    }
  }
}

// Leaves with grad-ready hooks (autograd/hooks.h): how many edges into each are still to run. A
// leaf fires when its count reaches zero, or at the end of the pass when parts of it
// (OpDef::accumulate) go into its .grad only then.
struct ReadyLeaves {
  std::unordered_map<TensorImpl*, int> deps;
  void count(const Edge& e) {
    if (e.leaf && detail::has_grad_ready_hooks(e.leaf.get())) ++deps[e.leaf.get()];
  }
  void done(const Edge& e, const LeafParts& parts) {
    if (deps.empty() || !e.leaf) return;
    const auto it = deps.find(e.leaf.get());
    if (it == deps.end() || --it->second > 0 || parts.index.contains(e.leaf.get())) return;
    detail::run_grad_ready_hooks(e.leaf.get());
  }
};

}  // namespace

Node::~Node() {
  // The outermost ~Node on the thread frees, in a loop, the nodes the inner ones hand it: one
  // list per freed graph. A plain pointer, not a thread_local vector, which thread exit could
  // destroy before a Node that another thread_local or static still holds.
  thread_local std::vector<std::shared_ptr<Node>>* outer = nullptr;
  if (outer) {
    take_sole_owned(*this, *outer);
    return;
  }
  std::vector<std::shared_ptr<Node>> pending;
  take_sole_owned(*this, pending);
  if (pending.empty()) return;
  outer = &pending;
  while (!pending.empty()) {
    std::shared_ptr<Node> n = std::move(pending.back());
    pending.pop_back();
    n.reset();  // its ~Node adds the nodes it alone kept alive
  }
  outer = nullptr;
}

void record(const OpDef& def, const Attrs& attrs, std::span<const Tensor> in,
            std::span<Tensor> out) {
  auto node = std::make_shared<Node>();
  node->op = &def;
  node->attrs = attrs;
  node->seq = g_next_seq.fetch_add(1, std::memory_order_relaxed);
  node->next.resize(in.size());
  node->input_metas.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    node->input_metas.push_back(meta_of(in[i]));
    if (def.never_differentiated(i) || !in[i].requires_grad()) continue;
    TensorImpl* t = in[i].impl();
    if (t->grad_fn)
      node->next[i] = {t->grad_fn, t->output_nr, nullptr};
    else
      node->next[i] = {nullptr, 0, in[i].impl_ptr()};
  }
  node->saved_versions.reserve(((def.save & Save::Inputs) ? in.size() : 0) +
                               ((def.save & Save::Outputs) ? out.size() : 0));
  if ((def.save & Save::Inputs)) {
    node->saved_inputs.assign(in.begin(), in.end());
    for (const Tensor& t : in) node->saved_versions.push_back(t.storage()->version());
  }
  if ((def.save & Save::Outputs)) {
    // Detached views: an output holding its own node through grad_fn would be a cycle.
    node->saved_outputs.reserve(out.size());
    for (const Tensor& t : out) {
      node->saved_outputs.push_back(t.detach());
      node->saved_versions.push_back(t.storage()->version());
    }
  }
  node->num_outputs = static_cast<int>(out.size());
  for (size_t i = 0; i < out.size(); ++i) {
    TensorImpl* t = out[i].impl();
    t->grad_fn = node;
    t->output_nr = static_cast<uint32_t>(i);
    t->requires_grad = true;
  }
}

namespace {
// The dispatcher and Tensor::backward know nothing of autograd: they call these hooks, installed
// when the library loads.
const bool kTapeInstalled = (set_tape_hook(&record), set_backward_hook(&backward), true);
}  // namespace

namespace {

// Every node reachable from `start` with how many edges lead into it; one table, so each edge
// costs one lookup (eager dispatch overhead matters). Counts the leaves' edges into `leaves`
// when grad-ready hooks want them.
std::unordered_map<Node*, Pending> count_edges(Node* start, ReadyLeaves* leaves) {
  std::unordered_map<Node*, Pending> pending;
  std::vector<Node*> stack{start};
  pending[start];
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next) {
      if (leaves) leaves->count(e);
      if (!e.node) continue;
      auto [it, first] = pending.try_emplace(e.node.get());
      ++it->second.deps;
      if (first) stack.push_back(e.node.get());
    }
  }
  return pending;
}

// Runs `node`'s backward on its output gradients: into `grad_in`, or, for an accumulating op,
// straight into the sum its one input is gathering (a leaf's parts or the next node's slot).
void run_node(Node& node, const std::array<Tensor, kMaxOutputs>& grads,
              std::vector<Tensor>& grad_in, std::vector<uint8_t>& needs, LeafParts& leaf_parts,
              std::unordered_map<Node*, Pending>& pending) {
  size_t v = 0;
  for (const Tensor& t : node.saved_inputs) check_saved(node, t, node.saved_versions[v++]);
  for (const Tensor& t : node.saved_outputs) check_saved(node, t, node.saved_versions[v++]);
  needs.resize(node.next.size());
  for (size_t i = 0; i < node.next.size(); ++i) needs[i] = node.next[i].valid();
  const OpDef& def = *node.op;
  const BackwardCtx ctx{
      node.saved_inputs, node.saved_outputs, {grads.data(), static_cast<size_t>(node.num_outputs)},
      node.input_metas,  node.attrs,         needs};
  const Edge& e = node.next[0];
  if (def.accumulate && e.leaf) {
    Tensor& parts = leaf_parts.of(e.leaf);
    bool mine = parts.defined();
    accumulate_part(node, ctx, parts, mine);
  } else if (def.accumulate && e.node) {
    Pending& target = pending.find(e.node.get())->second;
    accumulate_part(node, ctx, target.grads[e.output_nr], target.owned[e.output_nr]);
  } else {
    def.backward(ctx, grad_in.data());
  }
}

}  // namespace

void backward(const Tensor& root, const Tensor& grad) {
  NoGradGuard no_grad;
  if (!root.impl()->grad_fn) {
    accumulate_leaf(root.impl_ptr(), grad);
    if (detail::any_grad_ready_hooks()) detail::run_grad_ready_hooks(root.impl());
    return;
  }
  ReadyLeaves ready_leaves;
  std::unordered_map<Node*, Pending> pending = count_edges(
      root.impl()->grad_fn.get(), detail::any_grad_ready_hooks() ? &ready_leaves : nullptr);
  // Later nodes first; the order is deterministic, so eager and traced runs accumulate
  // gradients in the same order and agree bitwise.
  auto later = [](const Node* a, const Node* b) { return a->seq < b->seq; };
  std::priority_queue<Node*, std::vector<Node*>, decltype(later)> ready(later);
  LeafParts leaf_parts;
  pending[root.impl()->grad_fn.get()].grads[root.impl()->output_nr] = grad;
  ready.push(root.impl()->grad_fn.get());
  // Keep nodes alive while running: releasing a node's saved tensors can drop the last
  // reference to its inputs' nodes.
  std::vector<std::shared_ptr<Node>> keep_alive{root.impl()->grad_fn};
  keep_alive.reserve(pending.size());
  std::vector<Tensor> grad_in;
  std::vector<uint8_t> needs;

  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    ENCORE_CHECK(!node->released, ValueError, "[backward] the graph through ", node->op->name,
                 " was already used by a previous backward() and its saved tensors freed");
    const std::array<Tensor, kMaxOutputs> grads = std::move(pending.find(node)->second.grads);
    bool any = false;
    for (int i = 0; i < node->num_outputs; ++i) any |= grads[i].defined();
    grad_in.assign(node->next.size(), Tensor());
    if (any) run_node(*node, grads, grad_in, needs, leaf_parts, pending);
    node->saved_inputs.clear();
    node->saved_outputs.clear();
    node->released = true;
    for (size_t i = 0; i < node->next.size(); ++i) {
      const Edge& e = node->next[i];
      if (!e.valid()) continue;
      Tensor& g = grad_in[i];
      if (g.defined()) {
        ENCORE_CHECK(g.shape() == node->input_metas[i].shape, ShapeError, "[backward] ",
                     node->op->name, " produced a gradient ", g.shape().str(), " for input ", i,
                     " of shape ", node->input_metas[i].shape.str());
      }
      if (e.leaf) {
        if (g.defined()) accumulate_leaf(e.leaf, std::move(g));
        ready_leaves.done(e, leaf_parts);
        continue;
      }
      Pending& target = pending.find(e.node.get())->second;
      if (g.defined()) {
        Tensor& acc = target.grads[e.output_nr];
        bool& mine = target.owned[e.output_nr];
        if (!acc.defined())
          acc = std::move(g);
        else if (mine)
          acc.add_(g);
        else
          acc = add(acc, g), mine = true;
      }
      if (--target.deps == 0) {
        keep_alive.push_back(e.node);
        ready.push(e.node.get());
      }
    }
  }
  for (auto& [leaf, g] : leaf_parts.parts) {
    accumulate_leaf(leaf, std::move(g));
    if (ready_leaves.deps.contains(leaf.get())) detail::run_grad_ready_hooks(leaf.get());
  }
}

}  // namespace encore::autograd
