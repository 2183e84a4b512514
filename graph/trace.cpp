#include "graph/trace.h"

#include <algorithm>
#include <cstdio>
#include <mutex>

#include "core/ledger.h"
#include "core/modes.h"
#include "graph/passes.h"
#include "graph/tracer.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

namespace encore {

ShapePolicy ShapePolicy::bucket(int axis, std::vector<int64_t> sizes, std::vector<int> args) {
  ENCORE_CHECK(!sizes.empty() && !args.empty(), ValueError, "[trace] a bucket policy needs sizes and arguments");
  std::sort(sizes.begin(), sizes.end());
  ENCORE_CHECK(sizes.front() > 0, ValueError, "[trace] bucket sizes must be positive");
  ShapePolicy p;
  p.kind = Kind::Bucket;
  p.axis = axis;
  p.sizes = std::move(sizes);
  p.args = std::move(args);
  return p;
}

std::string ShapePolicy::str() const {
  if (kind == Kind::Exact) return "exact";
  std::string s = detail::cat("bucket(axis ", axis, ", sizes ");
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i) s += '/';
    s += std::to_string(sizes[i]);
  }
  return s + ")";
}

std::string TraceStats::table(const std::string& name) const {
  std::string s = detail::cat("traced function '", name, "': ", calls, " calls, ", hits, " replays, ", eager_calls,
                              " eager first calls, ", traces, " traces",
                              evictions ? detail::cat(", ", evictions, " evicted") : "", "\n");
  char line[512];
  std::snprintf(line, sizeof line, "  %-3s %-6s %9s %9s %9s %9s %6s %11s  %s\n", "#", "call", "trace_ms", "plan_ms",
                "capt_ms", "tune_ms", "nodes", "arena_KiB", "reason");
  s += line;
  if (records_dropped) s += detail::cat("  (", records_dropped, " older traces not shown)\n");
  for (size_t i = 0; i < records.size(); ++i) {
    const TraceRecord& r = records[i];
    std::snprintf(line, sizeof line, "  %-3lld %-6lld %9.3f %9.3f %9.3f %9.3f %6d %11.1f  %s\n",
                  static_cast<long long>(records_dropped + static_cast<int64_t>(i) + 1),
                  static_cast<long long>(r.call), (r.trace_ns + r.optimize_ns) / 1e6, r.plan_ns / 1e6,
                  (r.capture_ns + r.instantiate_ns) / 1e6, r.autotune_ns / 1e6, r.nodes, r.arena_bytes / 1024.0,
                  r.reason.c_str());
    s += line;
  }
  return s;
}

namespace {

// Every traced call of the process holds this lock: replays, traces and eager first calls of
// different traced functions never interleave, so threads sharing a model stay consistent.
// Recursive: a traced function may call another one (or itself) from its eager first call.
std::recursive_mutex& traced_calls_mutex() {
  static std::recursive_mutex m;
  return m;
}

// Traced calls nested on this thread. A traced function that calls itself without end would
// otherwise exhaust the C stack (each level adds frames of the host language and of encore).
thread_local int g_nesting = 0;
constexpr int kMaxNesting = 64;

struct Nesting {
  explicit Nesting(const std::string& name) {
    ENCORE_CHECK(g_nesting < kMaxNesting, ValueError, "[trace] '", name, "' is nested more than ", kMaxNesting,
                 " traced calls deep; does it call itself without end?");
    ++g_nesting;
  }
  ~Nesting() { --g_nesting; }
};

// Logs the value each .grad slot had before a call first assigned it (passing events on to an
// outer log), so the function can be traced from the state the call started in.
class GradUndoLog final : public GradObserver {
 public:
  GradUndoLog() : previous_(grad_observer()) { set_grad_observer(this); }
  ~GradUndoLog() override { uninstall(); }
  GradUndoLog(const GradUndoLog&) = delete;
  GradUndoLog& operator=(const GradUndoLog&) = delete;

  void uninstall() {
    if (installed_) set_grad_observer(previous_);
    installed_ = false;
  }
  void on_grad_read(const std::shared_ptr<TensorImpl>& leaf) override {
    if (previous_) previous_->on_grad_read(leaf);
  }
  void on_grad_write(const std::shared_ptr<TensorImpl>& leaf) override {
    if (previous_) previous_->on_grad_write(leaf);
    if (std::none_of(slots_.begin(), slots_.end(), [&](const auto& s) { return s.first == leaf; }))
      slots_.emplace_back(leaf, leaf->grad);
  }
  /// Swaps every logged slot's current value with the logged one: back to the start of the
  /// call, and (called again) forward to its end.
  void swap() {
    for (auto& [leaf, grad] : slots_) std::swap(leaf->grad, grad);
  }

 private:
  GradObserver* previous_;
  bool installed_ = true;
  std::vector<std::pair<std::shared_ptr<TensorImpl>, std::shared_ptr<TensorImpl>>> slots_;
};

// Records the value of every mode flag read while the function traces (passing reads on to an
// outer observer): each becomes a guard of the cache entry.
class FlagLog final : public ModeFlagObserver {
 public:
  explicit FlagLog(std::vector<std::pair<std::shared_ptr<const ModeFlag>, bool>>& reads)
      : previous_(mode_flag_observer()), reads_(reads) {
    set_mode_flag_observer(this);
  }
  ~FlagLog() override { set_mode_flag_observer(previous_); }
  FlagLog(const FlagLog&) = delete;
  FlagLog& operator=(const FlagLog&) = delete;
  void on_flag_read(const std::shared_ptr<const ModeFlag>& flag, bool value) override {
    if (previous_) previous_->on_flag_read(flag, value);
    if (std::none_of(reads_.begin(), reads_.end(), [&](const auto& r) { return r.first == flag; }))
      reads_.emplace_back(flag, value);
  }

 private:
  ModeFlagObserver* previous_;
  std::vector<std::pair<std::shared_ptr<const ModeFlag>, bool>>& reads_;
};

std::string grad_label(const TensorImpl& leaf) {
  return leaf.name.empty() ? "a tensor " + leaf.shape.str() : "'" + leaf.name + "'";
}

// The persistent buffer a traced step writes `leaf`'s gradient into when the function
// assigned its .grad: the same tensor in every Plan, so users read one .grad.
Tensor persistent_grad(TensorImpl& leaf) {
  Tensor buffer(leaf.trace_grad);
  if (!buffer.defined() || buffer.shape() != leaf.shape || buffer.dtype() != leaf.dtype ||
      buffer.device() != leaf.device) {
    buffer = Tensor::empty(leaf.shape, leaf.dtype, leaf.device);
    leaf.trace_grad = buffer.impl_ptr();
  }
  return buffer;
}

// A tensor made while tracing without an op (a constant from host data) belongs to the graph.
// If the graph writes it, each replay must start from its value at trace time, as each eager
// call starts from a fresh constant: the graph first restores it from a snapshot.
void restore_written_constants(graph::Graph& g) {
  std::vector<graph::Node> restores;
  const size_t n = g.buffers.size();
  for (uint32_t b = 0; b < n; ++b) {
    graph::Buffer& buf = g.buffers[b];
    if (buf.kind != graph::BufferKind::External || !buf.written) continue;
    const bool owned = std::any_of(buf.owners.begin(), buf.owners.end(),
                                   [](const graph::Owner& o) { return !o.tensor.expired(); });
    if (owned || buf.nbytes == 0) continue;
    // Byte-for-byte: a view of whole 4-byte words (every dtype's size is a multiple of 4).
    const Shape words{static_cast<int64_t>(buf.nbytes / 4)};
    const Tensor live = Tensor::make_view(buf.storage, words, contiguous_strides(words), 0, DType::Int32);
    const Tensor snapshot = live.clone();
    graph::Buffer snap;
    snap.kind = graph::BufferKind::External;
    snap.nbytes = buf.nbytes;
    snap.device = buf.device;
    snap.storage = snapshot.storage();
    snap.label = buf.label + ".initial";
    const graph::Value dst{b, 0, words, contiguous_strides(words), DType::Int32};
    const graph::Value src{static_cast<uint32_t>(g.buffers.size()), 0, words, contiguous_strides(words), DType::Int32};
    g.buffers.push_back(std::move(snap));
    restores.push_back({&copy_inplace_op_def(), {}, {dst, src}, {}});
  }
  g.nodes.insert(g.nodes.begin(), restores.begin(), restores.end());
}

}  // namespace

std::unique_lock<std::recursive_mutex> TracedFunction::lock_calls() {
  return std::unique_lock<std::recursive_mutex>(traced_calls_mutex());
}

TracedFunction::TracedFunction(Fn fn, TraceOptions options) : fn_(std::move(fn)), options_(std::move(options)) {
  ENCORE_CHECK(fn_, ValueError, "[trace] no function to trace");
  ENCORE_CHECK(options_.max_cached >= 1, ValueError, "[trace] max_cached must be >= 1");
}

std::string TracedFunction::explain() const {
  std::string s;
  if (stats_.records_dropped) s += detail::cat("(", stats_.records_dropped, " older traces not shown)\n");
  for (size_t i = 0; i < stats_.records.size(); ++i) {
    const TraceRecord& r = stats_.records[i];
    s += detail::cat("trace ", stats_.records_dropped + static_cast<int64_t>(i) + 1, " (call ", r.call, "): ", r.reason,
                     "\n    signature ", r.signature, "\n");
  }
  return s.empty() ? "no traces yet\n" : s;
}

void TracedFunction::clear() {
  std::lock_guard lock(traced_calls_mutex());
  ENCORE_CHECK(!active_, ValueError, "[trace] '", options_.name, "' cannot be cleared while a call to it runs");
  cache_.clear();
  evicted_.clear();
  last_ = nullptr;
}

std::string TracedFunction::stale_reason(const Entry& e) const {
  for (const Captured& c : e.captured) {
    if (c.owner.expired()) return "captured tensor '" + c.label + "' no longer exists";
    if (c.raw->storage.get() != c.storage)
      return "storage of captured tensor '" + c.label + "' was replaced (set_data or Module::to)";
  }
  for (const GradGuard& g : e.grad_guards)
    if (g.leaf.expired()) return "a tensor whose gradient the function read no longer exists";
  return {};
}

std::string TracedFunction::guard_reason(const Entry& e) const {
  for (const Captured& c : e.captured)
    if (c.raw->requires_grad != c.requires_grad)
      return "captured tensor '" + c.label + "' " + (c.requires_grad ? "no longer requires" : "now requires") + " grad";
  for (const GradGuard& g : e.grad_guards) {
    const TensorImpl* now = g.raw->grad.get();
    if (now == g.expected) continue;
    const std::string what = "the gradient of " + grad_label(*g.raw);
    if (!g.expected) return what + " was None when traced and is set now";
    if (!now) return what + " was set when traced and is None now";
    return what + " is another tensor than when traced";
  }
  for (const FlagGuard& f : e.flag_guards) {
    const std::shared_ptr<const ModeFlag> flag = f.flag.lock();
    if (flag && flag->peek() != f.value)
      return "'" + flag->label() + "' is in " + (flag->peek() ? "training" : "inference") + " mode now (" +
             (f.value ? "training" : "inference") + " when traced)";
  }
  return {};
}

void TracedFunction::record_graph(const std::vector<Arg>& args, graph::Graph& g, Entry& entry) {
  graph::Tracer tracer(g);
  std::vector<std::pair<std::shared_ptr<const ModeFlag>, bool>> flags_read;
  try {
    {
      const FlagLog flag_log(flags_read);
      std::vector<Arg> symbolic = args;
      int k = 0;
      for (size_t i = 0; i < args.size(); ++i) {
        if (const Tensor* t = std::get_if<Tensor>(&args[i])) {
          const std::string label = i < options_.arg_names.size() ? options_.arg_names[i] : "arg" + std::to_string(i);
          symbolic[i] = tracer.input(k++, *t, label);
        }
      }
      const std::vector<Tensor> out = fn_(symbolic);
      for (size_t i = 0; i < out.size(); ++i) {
        ENCORE_CHECK(out[i].defined(), ValueError, "[trace] '", options_.name, "' returned an undefined tensor as output ", i);
        g.outputs.push_back(tracer.value(out[i], "trace"));
      }
    }  // the function's symbolic tensors die here, unless something outside keeps them
    for (const auto& [flag, value] : flags_read) entry.flag_guards.push_back({flag, value});
    for (const graph::GradSlot& slot : tracer.grad_slots()) {
      const std::shared_ptr<TensorImpl> leaf = slot.leaf.lock();
      if (!leaf) continue;
      if (slot.read_first) entry.grad_guards.push_back({leaf, leaf.get(), slot.before.get()});
      if (!slot.written) continue;
      std::shared_ptr<TensorImpl> grad = leaf->grad;
      if (grad && grad->storage->is_symbolic()) {
        // The gradient the function assigned exists only inside the graph: the graph writes
        // it into the leaf's persistent buffer (copy elision usually removes the copy).
        const Tensor buffer = persistent_grad(*leaf);
        const Tensor in[] = {buffer, Tensor(grad)};
        tracer.record(copy_inplace_op_def(), {}, in, {});
        grad = buffer.impl_ptr();
      }
      entry.grad_writes.push_back({leaf, leaf.get(), std::move(grad)});
    }
    tracer.uninstall();
    // Nothing ran: the caller's gradients stay as they were (a replay applies the new ones).
    tracer.restore_grads();
    int64_t escaped = tracer.escaped_buffer();
    if (escaped >= 0 && options_.collect_garbage) {
      options_.collect_garbage();
      escaped = tracer.escaped_buffer();
    }
    if (escaped >= 0) {
      std::string made_by = "an argument";
      for (const graph::Node& n : g.nodes)
        for (const graph::Value& v : n.out)
          if (v.buffer == escaped) made_by = std::string("the result of ") + n.op->name;
      throw ValueError(detail::cat(
          "[trace] '", options_.name, "' keeps a tensor made inside the trace (", made_by, ", buffer ",
          g.buffers[escaped].label, ") alive after returning: stored in an attribute or a list, or state created while "
          "tracing (an optimizer slot, a layer built inside the function). Its values exist only inside replays, so "
          "eager and traced runs would differ. Return it from the function, or create that state before the traced "
          "call"));
    }
  } catch (...) {
    tracer.uninstall();
    tracer.restore_grads();
    throw;
  }
}

TracedFunction::Entry& TracedFunction::trace(const std::vector<Arg>& args, std::string reason) {
  TraceRecord rec;
  rec.call = stats_.calls;
  rec.reason = std::move(reason);
  Entry entry;
  entry.signature = graph::Signature::of(args);
  rec.signature = entry.signature.str(options_.arg_names);
  graph::Graph g;
  {
    ScopedTimer timer(Counter::TraceNs, "trace", options_.name);
    record_graph(args, g, entry);
    rec.trace_ns = timer.stop();
  }
  Ledger& ledger = Ledger::global();
  ledger.add(Counter::Traces, 1);
  restore_written_constants(g);
  {
    ScopedTimer timer(Counter::OptimizeNs, "optimize", options_.name);
    if (options_.optimize) {
      const graph::PassStats ps = graph::run_passes(g);
      rec.nodes_removed = ps.dead_nodes_removed;
      rec.copies_elided = ps.copies_elided;
    }
    rec.optimize_ns = timer.stop();
  }
  rec.nodes = static_cast<int>(g.nodes.size());
  // Captured tensors still alive now are the caller's (parameters, optimizer state): each
  // call checks they still own the storage the graph uses. Temporaries (constants made while
  // tracing, views) are gone by now and their storage belongs to the graph.
  for (const graph::Buffer& b : g.buffers) {
    if (b.kind != graph::BufferKind::External) continue;
    for (const graph::Owner& o : b.owners)
      if (auto owner = o.tensor.lock())
        entry.captured.push_back({o.tensor, owner.get(), b.storage.get(), o.requires_grad, b.label});
  }
  const int64_t tune_before = ledger.get(Counter::AutotuneNs);
  entry.plan = std::make_unique<graph::Plan>(std::move(g));
  rec.autotune_ns = ledger.get(Counter::AutotuneNs) - tune_before;
  rec.plan_ns = entry.plan->times().plan_ns;
  rec.capture_ns = entry.plan->times().capture_ns;
  rec.instantiate_ns = entry.plan->times().instantiate_ns;
  rec.arena_bytes = entry.plan->memory().arena_bytes;
  rec.intermediate_bytes = entry.plan->memory().intermediate_bytes;
  rec.peak_live_bytes = entry.plan->memory().peak_live_bytes;

  ++stats_.traces;
  if (stats_.records.size() == TraceStats::kMaxRecords) {
    stats_.records.erase(stats_.records.begin());
    ++stats_.records_dropped;
  }
  stats_.records.push_back(rec);
  cache_.push_front(std::move(entry));
  while (cache_.size() > options_.max_cached) {
    if (last_ == &cache_.back()) last_ = nullptr;
    evicted_.push_front(std::move(cache_.back().signature));
    if (evicted_.size() > 64) evicted_.pop_back();
    cache_.pop_back();
    ++stats_.evictions;
  }
  last_ = &cache_.front();
  if (options_.retrace_warning > 0 && stats_.traces > options_.retrace_warning && !warned_) {
    warned_ = true;
    const std::string msg = detail::cat(
        "[trace] '", options_.name, "' has been traced ", stats_.traces, " times (warning threshold ",
        options_.retrace_warning, "). Latest: ", rec.reason,
        ". Each trace costs tracing and planning time; use a bucket shape policy for varying lengths, "
        "and keep values that change every call out of the static arguments.");
    if (options_.on_warning) options_.on_warning(msg);
    else std::fprintf(stderr, "%s\n", msg.c_str());
  }
  return cache_.front();
}

std::vector<Tensor> TracedFunction::replay(Entry& e, const std::vector<Arg>& args) {
  ScopedTimer timer(Counter::ReplayNs, "replay", options_.name);
  std::vector<Tensor> inputs;
  inputs.reserve(args.size());
  for (const Arg& a : args)
    if (const Tensor* t = std::get_if<Tensor>(&a)) inputs.push_back(*t);
  e.plan->run(inputs);
  GradObserver* const observer = grad_observer();  // an outer call's undo log
  for (const GradWrite& w : e.grad_writes) {
    if (w.leaf.expired() || w.raw->grad == w.grad) continue;
    if (observer) observer->on_grad_write(w.leaf.lock());
    w.raw->grad = w.grad;
  }
  std::vector<Tensor> out = e.plan->outputs(options_.alias_outputs);
  last_ = &e;
  Ledger::global().add(Counter::Replays, 1);
  stats_.replay_ns += timer.stop();
  return out;
}

std::vector<Tensor> TracedFunction::operator()(const std::vector<Arg>& call_args) {
  const Nesting nesting(options_.name);
  // Called while another function traces: inline into that graph.
  if (tracing()) return fn_(call_args);
  std::lock_guard lock(traced_calls_mutex());
  // Called again from its own eager first call (recursion): a plain eager call.
  if (active_) return fn_(call_args);
  active_ = true;
  struct Inactive {
    bool& active;
    ~Inactive() { active = false; }
  } inactive{active_};
  ++stats_.calls;

  // Bucketing pads the chosen arguments up to the next bucket length.
  const std::vector<Arg>* args = &call_args;
  std::vector<Arg> padded;
  int64_t pad = 0;
  int axis = 0;
  std::string bucket_note;
  if (options_.shapes.kind == ShapePolicy::Kind::Bucket) {
    const ShapePolicy& p = options_.shapes;
    int64_t length = -1;
    for (int i : p.args) {
      ENCORE_CHECK(i >= 0 && static_cast<size_t>(i) < call_args.size() && std::holds_alternative<Tensor>(call_args[i]),
                   ValueError, "[trace] the bucket policy of '", options_.name, "' names argument ", i,
                   ", which is not a tensor argument");
      const Tensor& t = std::get<Tensor>(call_args[i]);
      axis = normalize_axis(p.axis, t.dim(), "trace");
      ENCORE_CHECK(length < 0 || t.shape()[axis] == length, ShapeError, "[trace] bucketed arguments of '",
                   options_.name, "' differ in length along axis ", axis);
      length = t.shape()[axis];
    }
    const auto it = std::lower_bound(p.sizes.begin(), p.sizes.end(), length);
    if (it == p.sizes.end()) {
      bucket_note = detail::cat(" (length ", length, " exceeds the largest bucket ", p.sizes.back(), ")");
    } else if (*it > length) {
      pad = *it - length;
      padded = call_args;
      for (int i : p.args) {
        const Tensor& t = std::get<Tensor>(call_args[i]);
        Shape zs = t.shape();
        zs[axis] = pad;
        padded[i] = concat({t, zeros(zs, t.dtype(), t.device())}, axis);
      }
      args = &padded;
    }
  }
  auto trim = [&](std::vector<Tensor> out) {
    if (pad > 0)
      for (Tensor& o : out)
        if (o.dim() > axis && o.shape()[axis] >= pad) o = o.slice(axis, 0, o.shape()[axis] - pad);
    return out;
  };

  std::string reason;
  for (auto it = cache_.begin(); it != cache_.end();) {
    if (!it->signature.matches(*args)) {
      ++it;
      continue;
    }
    if (std::string stale = stale_reason(*it); !stale.empty()) {
      // The graph refers to storage the caller no longer uses: it can never replay again.
      reason = std::move(stale);
      if (last_ == &*it) last_ = nullptr;
      it = cache_.erase(it);
      continue;
    }
    if (std::string guard = guard_reason(*it); !guard.empty()) {
      reason = std::move(guard);  // still right for the state it was traced in
      ++it;
      continue;
    }
    ++stats_.hits;
    if (it != cache_.begin()) cache_.splice(cache_.begin(), cache_, it);
    return trim(replay(cache_.front(), *args));
  }
  const bool evicted = reason.empty() && std::any_of(evicted_.begin(), evicted_.end(),
                                                     [&](const graph::Signature& s) { return s.matches(*args); });
  if (evicted) {
    reason = detail::cat("signature evicted earlier (the cache holds ", options_.max_cached, " graphs)");
  } else if (reason.empty()) {
    if (cache_.empty()) {
      reason = stats_.traces == 0 ? "first call" : "no cached graph (cleared)";
    } else {
      const graph::Signature now = graph::Signature::of(*args);
      const Entry* nearest = &cache_.front();
      for (const Entry& e : cache_)
        if (now.distance(e.signature) < now.distance(nearest->signature)) nearest = &e;
      reason = "new signature: " + now.diff(nearest->signature, options_.arg_names);
    }
  }
  // A miss runs eagerly: its results are this call's results (on the unpadded arguments), and
  // state made on first use (lazily built layers, optimizer slots) exists afterwards. Then the
  // function is traced from the state the call started in: the gradients the eager run
  // assigned are swapped back for the trace, and forward again after it.
  ++stats_.eager_calls;
  GradUndoLog log;
  std::vector<Tensor> out = fn_(call_args);
  log.uninstall();
  log.swap();
  try {
    trace(*args, reason + bucket_note);
  } catch (...) {
    log.swap();
    throw;
  }
  log.swap();
  return out;
}

}  // namespace encore
