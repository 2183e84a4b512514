#include "graph/trace.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>

#include "core/ledger.h"
#include "core/modes.h"
#include "graph/lengths.h"
#include "graph/passes.h"
#include "graph/tracer.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

namespace encore {

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
  if (real_elements > 0)
    s += detail::cat("  bucketing: ", retraces_saved, " retraces saved; ", padding_elements, " zeros added to ",
                     real_elements, " elements (", 100 * padding_elements / real_elements, "% padding)\n");
  if (const int64_t n = break_even_replays(); n != 0) {
    const double trace_ms = [&] {
      double t = 0;
      for (const TraceRecord& r : records) t += r.total_ns() / 1e6;
      return records.empty() ? 0.0 : t / static_cast<double>(records.size());
    }();
    s += n < 0 ? detail::cat("  break-even: never (a replay takes ", replay_ns / 1e6 / hits, " ms, an eager call ",
                             eager_ns / 1e6 / eager_calls, " ms)\n")
               : detail::cat("  break-even: a trace (", trace_ms, " ms) is paid back after ", n, " replays (",
                             replay_ns / 1e6 / hits, " ms each against ", eager_ns / 1e6 / eager_calls,
                             " ms eager)\n");
  }
  return s;
}

int64_t TraceStats::break_even_replays() const {
  if (hits == 0 || eager_calls == 0 || records.empty()) return 0;
  double trace_ns = 0;
  for (const TraceRecord& r : records) trace_ns += static_cast<double>(r.total_ns());
  trace_ns /= static_cast<double>(records.size());
  const double saved = static_cast<double>(eager_ns) / eager_calls - static_cast<double>(replay_ns) / hits;
  if (!(saved > 0)) return -1;
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(trace_ns / saved)));
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

graph::RetraceCause make_cause(graph::RetraceCause::Kind kind, std::string name = {}, std::string note = {},
                               std::string old_value = {}, std::string new_value = {}) {
  graph::RetraceCause c;
  c.kind = kind;
  c.arg_name = std::move(name);
  c.note = std::move(note);
  c.old_value = std::move(old_value);
  c.new_value = std::move(new_value);
  return c;
}

// Records the value of every mode flag read while the function traces (passing reads on to an
// outer observer): each becomes a guard of the cache entry.
class FlagLog final : public ModeFlagObserver {
 public:
  FlagLog(std::vector<std::pair<std::shared_ptr<const ModeFlag>, bool>>& reads,
          std::vector<std::pair<std::shared_ptr<const Generation>, uint64_t>>& generations)
      : previous_(mode_flag_observer()), reads_(reads), generations_(generations) {
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
  void on_generation_read(const std::shared_ptr<const Generation>& generation, uint64_t count) override {
    if (previous_) previous_->on_generation_read(generation, count);
    if (std::none_of(generations_.begin(), generations_.end(), [&](const auto& r) { return r.first == generation; }))
      generations_.emplace_back(generation, count);
  }

 private:
  ModeFlagObserver* previous_;
  std::vector<std::pair<std::shared_ptr<const ModeFlag>, bool>>& reads_;
  std::vector<std::pair<std::shared_ptr<const Generation>, uint64_t>>& generations_;
};

std::string grad_label(const TensorImpl& leaf) {
  return leaf.name.empty() ? "a tensor " + leaf.shape.str() : "'" + leaf.name + "'";
}

// The persistent buffer a traced step writes `leaf`'s gradient into when the function
// assigned its .grad: the same tensor in every Plan, so users read one .grad.
Tensor persistent_grad(TensorImpl& leaf) {
  Tensor buffer(graph::trace_grad(leaf));
  if (!buffer.defined() || buffer.shape() != leaf.shape || buffer.dtype() != leaf.dtype ||
      buffer.device() != leaf.device) {
    buffer = Tensor::empty(leaf.shape, leaf.dtype, leaf.device);
    graph::set_trace_grad(leaf, buffer.impl_ptr());
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
  for (const Entry& e : cache_) retire(e);
  cached_bytes_ = 0;
  cache_.clear();
  evicted_.clear();
  last_ = nullptr;
}

std::string TracedFunction::retrace_advice(const std::vector<Arg>& args,
                                           const std::vector<RetraceCause>& causes) {
  const std::string statics = "Keep values that change every call out of the static arguments.";
  int axis = -1;
  std::vector<int> varying;
  for (const RetraceCause& c : causes) {
    if (c.kind != RetraceCause::Kind::Shape || c.axis < 0 || (axis >= 0 && c.axis != axis)) return statics;
    axis = c.axis;
    varying.push_back(c.arg);
  }
  if (varying.empty() || options_.shapes.kind == ShapePolicy::Kind::Bucket) return statics;
  // Would a bucket policy be exact? Trace this call as a bucket would (the true length as an
  // input, the layers masking with it) and probe it with its last quarter treated as padding:
  // the same check a bucket's first trace runs.
  const int64_t length = std::get<Tensor>(args[varying[0]]).shape()[axis];
  const ShapePolicy policy = ShapePolicy::bucket(axis, {length}, varying);
  try {
    graph::BucketedCall probe = graph::bucket_call(policy, args, options_.name);
    probe.shortest = std::max<int64_t>(1, length - std::max<int64_t>(1, length / 4));
    Entry trial;
    graph::Graph g;
    record_graph(probe.args, g, trial, &probe);
    restore_written_constants(g);
    if (options_.optimize) graph::run_passes(g);
    graph::Plan plan(std::move(g));
    graph::check_bucket_exact(plan, policy, probe, options_.name, options_.arg_names, std::move(trial.trim));
  } catch (const Error& refused) {
    return detail::cat("A bucket policy along axis ", axis, " would not be exact for this function (it would be refused: ",
                       refused.what(), "). Fix the length yourself (pad and mask), or accept the traces.");
  }
  int64_t longest = 0;
  for (const AxisValues& v : axis_values())
    if (v.arg == varying[0] && v.axis == axis) longest = v.counts.back().first;
  std::vector<int64_t> sizes;
  for (int64_t size = 8; sizes.empty() || sizes.back() < longest; size *= 2) sizes.push_back(size);
  std::string args_text;
  for (size_t i = 0; i < varying.size(); ++i) args_text += (i ? ", " : "") + std::to_string(varying[i]);
  return detail::cat("Padding along axis ", axis, " is exact for this function: ",
                     ShapePolicy::bucket(axis, sizes, varying).str(), " (arguments ", args_text,
                     ") would serve lengths up to ", sizes.back(), " with ", sizes.size(), " graphs.");
}

void TracedFunction::retire(const Entry& e) { count_axis_values(e.signature, e.calls, retired_values_); }

void TracedFunction::count_axis_values(const graph::Signature& s, int64_t calls, AxisCounts& into) const {
  const ShapePolicy& p = options_.shapes;
  // A bucketed call's last argument is its true length, not the caller's.
  const size_t args = s.args.size() - (p.kind == ShapePolicy::Kind::Bucket && !s.args.empty() ? 1 : 0);
  for (size_t i = 0; i < args; ++i) {
    const auto* t = std::get_if<graph::TensorKey>(&s.args[i]);
    if (!t) continue;
    const bool bucketed = p.kind == ShapePolicy::Kind::Bucket &&
                          std::find(p.args.begin(), p.args.end(), static_cast<int>(i)) != p.args.end();
    for (int a = 0; a < t->shape.size(); ++a)
      if (!(bucketed && a == normalize_axis(p.axis, t->shape.size(), "trace")))  // counted as called
        into[{static_cast<int>(i), a}][t->shape[a]] += calls;
  }
}

std::vector<AxisValues> TracedFunction::axis_values() const {
  AxisCounts all = retired_values_;
  for (const Entry& e : cache_) count_axis_values(e.signature, e.calls, all);
  for (const auto& [key, counts] : bucket_lengths_)
    for (const auto& [v, n] : counts) all[key][v] += n;
  std::vector<AxisValues> out;
  for (auto& [key, counts] : all) {
    const auto [arg, axis] = key;
    const std::string name = static_cast<size_t>(arg) < options_.arg_names.size() ? options_.arg_names[arg] : "";
    out.push_back({arg, name, axis, {counts.begin(), counts.end()}});
  }
  return out;
}

std::optional<graph::RetraceCause> TracedFunction::stale_reason(const Entry& e) const {
  using K = graph::RetraceCause::Kind;
  for (const Captured& c : e.captured) {
    if (c.owner.expired()) return make_cause(K::CapturedGone, c.label);
    if (c.raw->storage.get() != c.storage) return make_cause(K::ReplacedParameter, c.label);
  }
  for (const GradGuard& g : e.grad_guards)
    if (g.leaf.expired())
      return make_cause(K::GradState, "", "a tensor whose gradient the function read no longer exists");
  // The count only grows: a graph built from a module's former parts never serves again.
  for (const GenerationGuard& g : e.generation_guards) {
    const std::shared_ptr<const Generation> generation = g.generation.lock();
    if (generation && generation->peek() != g.count) return make_cause(K::ModuleChanged, generation->label());
  }
  return std::nullopt;
}

std::optional<graph::RetraceCause> TracedFunction::guard_reason(const Entry& e) const {
  using K = graph::RetraceCause::Kind;
  auto flag = [](bool b) { return std::string(b ? "true" : "false"); };
  for (const Captured& c : e.captured)
    if (c.raw->requires_grad != c.requires_grad)
      return make_cause(K::CapturedRequiresGrad, c.label, "", flag(c.requires_grad), flag(c.raw->requires_grad));
  for (const GradGuard& g : e.grad_guards) {
    const TensorImpl* now = g.raw->grad.get();
    if (now == g.expected) continue;
    graph::RetraceCause cause =
        make_cause(K::GradState, grad_label(*g.raw), "", g.expected ? "set" : "None", now ? "set" : "None");
    cause.note = !g.expected ? "was None when traced and is set now"
                 : !now      ? "was set when traced and is None now"
                             : "is another tensor than when traced";
    if (g.expected && now) cause.new_value = "another tensor";
    return cause;
  }
  for (const FlagGuard& f : e.flag_guards) {
    const std::shared_ptr<const ModeFlag> flag = f.flag.lock();
    if (flag && flag->peek() != f.value) {
      const auto mode = [](bool training) { return training ? "training" : "inference"; };
      return make_cause(K::ModuleMode, flag->label(), "", mode(f.value), mode(flag->peek()));
    }
  }
  return std::nullopt;
}

void TracedFunction::record_graph(const std::vector<Arg>& args, graph::Graph& g, Entry& entry,
                                  const graph::BucketedCall* bucketed) {
  graph::Tracer tracer(g);
  std::vector<std::pair<std::shared_ptr<const ModeFlag>, bool>> flags_read;
  std::vector<std::pair<std::shared_ptr<const Generation>, uint64_t>> generations_read;
  try {
    {
      const FlagLog flag_log(flags_read, generations_read);
      std::vector<Arg> symbolic = args;
      int k = 0;
      for (size_t i = 0; i < args.size(); ++i) {
        if (const Tensor* t = std::get_if<Tensor>(&args[i])) {
          const std::string label = static_cast<int>(i) == (bucketed ? bucketed->length_arg : -1) ? "length"
                                    : i < options_.arg_names.size()                               ? options_.arg_names[i]
                                                                      : "arg" + std::to_string(i);
          symbolic[i] = tracer.input(k++, *t, label);
        }
      }
      // A bucketed call: the true length is the graph's last input, and the padded arguments
      // carry it (graph/lengths.h) for the layers to mask with.
      std::optional<graph::LengthScope> scope;
      if (bucketed && bucketed->length_arg >= 0) {
        scope.emplace();
        const Tensor length = std::get<Tensor>(symbolic[bucketed->length_arg]);
        symbolic.erase(symbolic.begin() + bucketed->length_arg);
        for (int i : bucketed->padded_args)
          graph::set_lengths(std::get<Tensor>(symbolic[i]), {length, bucketed->axis, [](int64_t n) { return n; }});
      }
      const std::vector<Tensor> out = fn_(symbolic);
      if (scope)
        for (const std::string& why : graph::inexact_notes()) {
          if (std::find(inexact_warned_.begin(), inexact_warned_.end(), why) != inexact_warned_.end()) continue;
          inexact_warned_.push_back(why);
          const std::string msg = detail::cat("[trace] '", options_.name, "' under its bucket policy is exact in distribution only: ", why);
          if (options_.on_warning) options_.on_warning(msg);
          else std::fprintf(stderr, "%s\n", msg.c_str());
        }
      for (size_t i = 0; i < out.size(); ++i) {
        ENCORE_CHECK(out[i].defined(), ValueError, "[trace] '", options_.name, "' returned an undefined tensor as output ", i);
        g.outputs.push_back(tracer.value(out[i], "trace"));
        if (const std::optional<graph::Lengths> l = graph::lengths_of(out[i])) {
          entry.trim.resize(out.size());
          entry.trim[i] = {l->axis, l->of_call};
        }
      }
    }  // the function's symbolic tensors die here, unless something outside keeps them
    for (const auto& [flag, value] : flags_read) entry.flag_guards.push_back({flag, value});
    for (const auto& [generation, count] : generations_read) entry.generation_guards.push_back({generation, count});
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

TracedFunction::Entry& TracedFunction::trace(const std::vector<Arg>& args, std::string reason,
                                             std::vector<graph::RetraceCause> causes,
                                             const graph::BucketedCall* bucketed) {
  TraceRecord rec;
  rec.call = stats_.calls;
  rec.reason = std::move(reason);
  rec.causes = std::move(causes);
  Entry entry;
  entry.signature = graph::Signature::of(args);
  std::vector<std::string> names = options_.arg_names;
  if (bucketed) {  // the true length, the last argument (graph/bucket.h)
    names.resize(args.size() - 1);
    names.push_back("length");
  }
  rec.signature = entry.signature.str(names);
  graph::Graph g;
  {
    ScopedTimer timer(Counter::TraceNs, "trace", options_.name);
    record_graph(args, g, entry, bucketed);
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
  if (bucketed) {
    ScopedTimer timer(Counter::PlanNs, "plan", options_.name);
    entry.trim = graph::check_bucket_exact(*entry.plan, options_.shapes, *bucketed, options_.name, options_.arg_names,
                                           std::move(entry.trim));
    rec.plan_ns += timer.stop();
  }

  ++stats_.traces;
  if (stats_.records.size() == TraceStats::kMaxRecords) {
    stats_.records.erase(stats_.records.begin());
    ++stats_.records_dropped;
  }
  stats_.records.push_back(rec);
  // What the cache budget counts: the arena, and buffers only the graph holds (constants,
  // their snapshots), not the caller's parameters.
  entry.bytes = entry.plan->memory().arena_bytes;
  for (const graph::Buffer& b : entry.plan->graph().buffers)
    if (b.kind == graph::BufferKind::External &&
        std::none_of(b.owners.begin(), b.owners.end(), [](const graph::Owner& o) { return !o.tensor.expired(); }))
      entry.bytes += b.nbytes;
  cached_bytes_ += entry.bytes;
  cache_.push_front(std::move(entry));
  while (cache_.size() > options_.max_cached ||
         (options_.max_cached_bytes && cached_bytes_ > options_.max_cached_bytes && cache_.size() > 1)) {
    if (last_ == &cache_.back()) last_ = nullptr;
    retire(cache_.back());
    cached_bytes_ -= cache_.back().bytes;
    // Kept for its signature and guards only: nothing of it holds memory or a tensor alive.
    cache_.back().plan.reset();
    cache_.back().grad_writes.clear();
    evicted_.splice(evicted_.begin(), cache_, std::prev(cache_.end()));
    if (evicted_.size() > 64) evicted_.pop_back();
    ++stats_.evictions;
  }
  last_ = &cache_.front();
  if (options_.retrace_warning > 0 && stats_.traces > options_.retrace_warning && !warned_) {
    warned_ = true;
    const std::string msg = detail::cat(
        "[trace] '", options_.name, "' has been traced ", stats_.traces, " times (warning threshold ",
        options_.retrace_warning, "). Latest: ", rec.reason, ". Each trace costs tracing and planning time. ",
        retrace_advice(args, rec.causes));
    if (options_.on_warning) options_.on_warning(msg);
    else std::fprintf(stderr, "%s\n", msg.c_str());
  }
  return cache_.front();
}

void TracedFunction::check_trimmed_shapes(const Entry& e, const std::vector<Tensor>& eager,
                                          const graph::BucketedCall& b) {
  const std::vector<graph::Value>& outs = e.plan->graph().outputs;
  for (size_t i = 0; i < outs.size() && i < eager.size(); ++i) {
    Shape s = outs[i].shape;
    if (const graph::Trim& t = e.trim[i]; t.axis >= 0) s[t.axis] = t.trimmed(s[t.axis], b.length, b.pad());
    if (s == eager[i].shape()) continue;
    const std::string bucket = options_.shapes.str();
    if (last_ == &cache_.front()) last_ = nullptr;
    cached_bytes_ -= cache_.front().bytes;
    cache_.pop_front();
    throw ValueError(detail::cat("[trace] ", bucket, " of '", options_.name, "' cannot be exact: output ", i,
                                 " has shape ", eager[i].shape().str(), " eagerly but ", s.str(),
                                 " from the padded call (its shape depends on the padded length, not on the values)"));
  }
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
  graph::BucketedCall bucketed;
  const bool bucketing = options_.shapes.kind == ShapePolicy::Kind::Bucket;
  std::string bucket_note;
  bool new_length = false;
  if (bucketing) {
    if (!Ledger::global().profiling()) {
      bucketed = graph::bucket_call(options_.shapes, call_args, options_.name);
    } else {
      ScopedTimer timer(Counter::CopyInNs, "copy_in", options_.name);
      bucketed = graph::bucket_call(options_.shapes, call_args, options_.name);
    }
    args = &bucketed.args;
    for (int i : options_.shapes.args) {
      new_length = ++bucket_lengths_[{i, bucketed.axis}][bucketed.length] == 1;
      const int64_t n = std::get<Tensor>(call_args[i]).numel();
      stats_.real_elements += n;
      stats_.padding_elements += bucketed.length ? n / bucketed.length * bucketed.pad() : 0;
    }
    if (!bucketed.bucketed)
      bucket_note = detail::cat(" (length ", bucketed.length, " exceeds the largest bucket ",
                                options_.shapes.sizes.back(), ")");
  }
  auto trim = [&](std::vector<Tensor> out) {
    if (bucketing) graph::trim_outputs(out, cache_.front().trim, bucketed.length, bucketed.pad());
    return out;
  };

  std::vector<graph::RetraceCause> causes;
  std::string reason;  // the causes as text
  for (auto it = cache_.begin(); it != cache_.end();) {
    if (!it->signature.matches(*args)) {
      ++it;
      continue;
    }
    // Of several graphs of this signature that cannot serve, the most recently used one (the
    // first met) says why: it served until now, so its cause is what the caller just changed.
    if (auto stale = stale_reason(*it)) {
      // The graph refers to storage the caller no longer uses: it can never replay again.
      if (causes.empty()) causes = {std::move(*stale)};
      if (last_ == &*it) last_ = nullptr;
      retire(*it);
      cached_bytes_ -= it->bytes;
      it = cache_.erase(it);
      continue;
    }
    if (auto guard = guard_reason(*it)) {
      if (causes.empty()) causes = {std::move(*guard)};  // still right for the state it was traced in
      ++it;
      continue;
    }
    ++stats_.hits;
    if (new_length) ++stats_.retraces_saved;
    ++it->calls;
    if (it != cache_.begin()) cache_.splice(cache_.begin(), cache_, it);
    return trim(replay(cache_.front(), *args));
  }
  using K = graph::RetraceCause::Kind;
  // An evicted graph that would have served this call makes the eviction the cause, whatever
  // the cached graphs of this signature say (their gradients may be gone, or set where this
  // call's are None). With nothing of this signature cached, an evicted graph that would not
  // have served tells why.
  bool evicted = false;
  for (const Entry& e : evicted_) {
    if (!e.signature.matches(*args)) continue;
    std::optional<graph::RetraceCause> why = stale_reason(e);
    if (!why) why = guard_reason(e);
    if (!why) {
      evicted = true;
      break;
    }
    if (causes.empty()) causes = {std::move(*why)};
  }
  if (evicted) {
    causes = {make_cause(K::Eviction, "",
                         options_.max_cached_bytes
                             ? detail::cat("the cache holds ", options_.max_cached, " graphs and ",
                                           options_.max_cached_bytes, " bytes")
                             : detail::cat("the cache holds ", options_.max_cached, " graphs"))};
  } else if (causes.empty()) {
    if (cache_.empty()) {
      causes = {make_cause(stats_.traces == 0 ? K::FirstCall : K::Cleared)};
    } else {
      const graph::Signature now = graph::Signature::of(*args);
      const Entry* nearest = &cache_.front();
      for (const Entry& e : cache_)
        if (now.distance(e.signature) < now.distance(nearest->signature)) nearest = &e;
      causes = now.changes(nearest->signature, options_.arg_names);
      reason = "new signature: " + now.diff(nearest->signature, options_.arg_names);
    }
  }
  if (reason.empty())
    for (size_t i = 0; i < causes.size(); ++i) reason += (i ? "; " : "") + causes[i].str();
  // A miss runs eagerly: its results are this call's results (on the unpadded arguments), and
  // state made on first use (lazily built layers, optimizer slots) exists afterwards. Then the
  // function is traced from the state the call started in: the gradients the eager run
  // assigned are swapped back for the trace, and forward again after it.
  ++stats_.eager_calls;
  GradUndoLog log;
  const int64_t eager_start = now_ns();
  std::vector<Tensor> out = fn_(call_args);
  stats_.eager_ns += now_ns() - eager_start;
  log.uninstall();
  log.swap();
  try {
    Entry& e = trace(*args, reason + bucket_note, std::move(causes), bucketing ? &bucketed : nullptr);
    if (bucketing) check_trimmed_shapes(e, out, bucketed);
  } catch (...) {
    log.swap();
    throw;
  }
  log.swap();
  // Replays return copies (Plan::outputs), so the call that traced does too: the function's
  // own results may be captured state or views of it, and a write to one changed the model
  // on this call only.
  if (!options_.alias_outputs) {
    const NoGradGuard no_grad;
    for (Tensor& t : out)
      if (t.defined()) t = t.detach().clone();
  }
  return out;
}

}  // namespace encore
