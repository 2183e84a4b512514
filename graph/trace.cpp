// The trace driver: a traced call is a short sequence of named phases (docs/ARCHITECTURE.md,
// "Tracing"). signature: bucketing pads the arguments and appends the true length; lookup: the
// cache, its guards, and the shortest length a bucket's graph serves; replay, or on a miss: the
// eager run, then the trace (graph/trace_record.cpp), passes, plan (and CUDA capture), the bucket
// probe (graph/probe.cpp), and the cache with its budget. Reports are in graph/trace_report.cpp.
#include "graph/trace.h"

#include <algorithm>
#include <mutex>

#include "core/ledger.h"
#include "core/modes.h"
#include "graph/effects.h"
#include "graph/passes.h"
#include "ops/dispatch.h"

namespace encore {

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
    ENCORE_CHECK(g_nesting < kMaxNesting, ValueError, "[trace] '", name, "' is nested more than ",
                 kMaxNesting, " traced calls deep; does it call itself without end?");
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

graph::RetraceCause make_cause(graph::RetraceCause::Kind kind, std::string name = {},
                               std::string note = {}, std::string old_value = {},
                               std::string new_value = {}) {
  graph::RetraceCause c;
  c.kind = kind;
  c.arg_name = std::move(name);
  c.note = std::move(note);
  c.old_value = std::move(old_value);
  c.new_value = std::move(new_value);
  return c;
}

std::string grad_label(const TensorImpl& leaf) {
  return leaf.name.empty() ? "a tensor " + leaf.shape.str() : "'" + leaf.name + "'";
}

// Buffers only the graph holds (constants, their snapshots), not the caller's parameters.
bool graph_owned(const graph::Buffer& b) {
  return b.kind == graph::BufferKind::External &&
         std::none_of(b.owners.begin(), b.owners.end(),
                      [](const graph::Owner& o) { return !o.tensor.expired(); });
}

}  // namespace

std::unique_lock<std::recursive_mutex> TracedFunction::lock_calls() {
  return std::unique_lock<std::recursive_mutex>(traced_calls_mutex());
}

TracedFunction::TracedFunction(Fn fn, TraceOptions options)
    : fn_(std::move(fn)), options_(std::move(options)) {
  ENCORE_CHECK(fn_, ValueError, "[trace] no function to trace");
  ENCORE_CHECK(options_.max_cached >= 1, ValueError, "[trace] max_cached must be >= 1");
}

void TracedFunction::clear() {
  std::lock_guard lock(traced_calls_mutex());
  ENCORE_CHECK(!active_, ValueError, "[trace] '", options_.name,
               "' cannot be cleared while a call to it runs");
  for (const Entry& e : cache_) retire(e);
  cached_bytes_ = 0;
  cache_.clear();
  evicted_.clear();
  last_ = nullptr;
}

std::vector<Tensor> TracedFunction::operator()(const std::vector<Arg>& call_args) {
  const Nesting nesting(options_.name);
  if (tracing())
    return fn_(call_args);  // called while another function traces: inlined into its graph
  std::lock_guard lock(traced_calls_mutex());
  if (active_) return fn_(call_args);  // called again from its own eager first call: a plain call
  active_ = true;
  struct Inactive {
    bool& active;
    ~Inactive() { active = false; }
  } inactive{active_};
  ++stats_.calls;
  Call call = signature_of(call_args);
  if (Entry* hit = lookup(call)) return replay_call(*hit, call);
  return trace_call(call);
}

// Bucketing pads the chosen arguments up to the next bucket length and appends the true length.
TracedFunction::Call TracedFunction::signature_of(const std::vector<Arg>& call_args) {
  Call call(call_args);
  if (options_.shapes.kind != ShapePolicy::Kind::Bucket) return call;
  call.bucketing = true;
  if (!Ledger::global().profiling()) {
    call.bucketed = graph::bucket_call(options_.shapes, call_args, options_.name);
  } else {
    ScopedTimer timer(Counter::CopyInNs, "copy_in", options_.name);
    call.bucketed = graph::bucket_call(options_.shapes, call_args, options_.name);
  }
  const graph::BucketedCall& b = call.bucketed;
  count_bucketed(call, 1);
  if (!b.bucketed)
    call.note = detail::cat(" (length ", b.length, " exceeds the largest bucket ",
                            options_.shapes.sizes.back(), ")");
  if (b.length == 0) serve_exactly(call, 1);
  return call;
}

// A length shorter than a bucket serves (eager refuses it, or an output would be empty) is traced
// exactly: it does what eager does, errors included.
void TracedFunction::serve_exactly(Call& call, int64_t shortest) {
  count_bucketed(call, -1);  // counted by its signature as an exact call
  call.bucketing = false;
  call.new_length = false;
  call.causes.clear();
  call.note = detail::cat(" (length ", call.bucketed.length, " is shorter than its bucket serves, ",
                          shortest, ": traced exactly)");
}

// The bucketing statistics of a call (`sign` -1: taken back).
void TracedFunction::count_bucketed(Call& call, int sign) {
  const graph::BucketedCall& b = call.bucketed;
  for (int i : options_.shapes.args) {
    std::map<int64_t, int64_t>& lengths = bucket_lengths_[{i, b.axis}];
    call.new_length = (lengths[b.length] += sign) == 1;
    if (lengths[b.length] == 0) lengths.erase(b.length);
    const int64_t n = std::get<Tensor>(call.caller[i]).numel();
    stats_.real_elements += sign * n;
    stats_.padding_elements += sign * (b.length ? n / b.length * b.pad() : 0);
  }
}

TracedFunction::Entry* TracedFunction::lookup(Call& call) {
  for (auto it = cache_.begin(); it != cache_.end();) {
    if (!it->signature.matches(call.args())) {
      ++it;
      continue;
    }
    // Of several graphs of this signature that cannot serve, the most recently used one (the
    // first met) says why: it served until now, so its cause is what the caller just changed.
    if (auto stale = stale_reason(*it)) {
      // The graph refers to storage the caller no longer uses: it can never replay again.
      if (call.causes.empty()) call.causes = {std::move(*stale)};
      if (last_ == &*it) last_ = nullptr;
      retire(*it);
      cached_bytes_ -= it->bytes;
      it = cache_.erase(it);
      continue;
    }
    if (auto guard = guard_reason(*it)) {
      if (call.causes.empty())
        call.causes = {std::move(*guard)};  // still right for the state it was traced in
      ++it;
      continue;
    }
    if (call.bucketing && call.bucketed.length < it->shortest_served) {
      serve_exactly(call, it->shortest_served);
      return lookup(call);
    }
    ++stats_.hits;
    if (call.new_length && call.bucketing) ++stats_.retraces_saved;
    ++it->calls;
    if (it != cache_.begin()) cache_.splice(cache_.begin(), cache_, it);
    return &cache_.front();
  }
  return nullptr;
}

void TracedFunction::explain_miss(Call& call) const {
  using K = graph::RetraceCause::Kind;
  // An evicted graph that would have served this call makes the eviction the cause, whatever
  // the cached graphs of this signature say (their gradients may be gone, or set where this
  // call's are None). With nothing of this signature cached, an evicted graph that would not
  // have served tells why.
  bool evicted = false;
  for (const Entry& e : evicted_) {
    if (!e.signature.matches(call.args())) continue;
    std::optional<graph::RetraceCause> why = stale_reason(e);
    if (!why) why = guard_reason(e);
    if (!why) {
      evicted = true;
      break;
    }
    if (call.causes.empty()) call.causes = {std::move(*why)};
  }
  if (evicted) {
    call.causes = {
        make_cause(K::Eviction, "",
                   options_.max_cached_bytes
                       ? detail::cat("the cache holds ", options_.max_cached, " graphs and ",
                                     options_.max_cached_bytes, " bytes")
                       : detail::cat("the cache holds ", options_.max_cached, " graphs"))};
  } else if (call.causes.empty()) {
    if (cache_.empty()) {
      call.causes = {make_cause(stats_.traces == 0 ? K::FirstCall : K::Cleared)};
    } else {
      const graph::Signature now = graph::Signature::of(call.args());
      const Entry* nearest = &cache_.front();
      for (const Entry& e : cache_)
        if (now.distance(e.signature) < now.distance(nearest->signature)) nearest = &e;
      call.causes = now.changes(nearest->signature, options_.arg_names);
      call.reason = "new signature: " + now.diff(nearest->signature, options_.arg_names);
    }
  }
  if (call.reason.empty())
    for (size_t i = 0; i < call.causes.size(); ++i)
      call.reason += (i ? "; " : "") + call.causes[i].str();
}

std::vector<Tensor> TracedFunction::replay_call(Entry& e, const Call& call) {
  if (!e.agreed) agree(e);
  std::vector<Tensor> out = replay(e, call.args());
  if (call.bucketing) graph::trim_outputs(out, e.trim, call.bucketed.length, call.bucketed.pad());
  return out;
}

// Before a graph with external effects first replays, the ranks check that they traced the same
// thing (graph/effects.h); with no check installed (one process) there is nothing to compare.
void TracedFunction::agree(Entry& e) const {
  const graph::AgreementCheck check = graph::agreement_check();
  if (!check) return;
  const std::string signature =
      e.signature.str(signature_names(e.shortest_served > 0, e.signature.args.size()));
  const graph::EffectsDigest digest =
      graph::effects_digest(e.plan->graph(), options_.name, signature);
  check(digest.hash, digest.description);
  e.agreed = true;
}

// A miss runs eagerly: its results are this call's results (on the unpadded arguments), and
// state made on first use (lazily built layers, optimizer slots) exists afterwards; external
// effects run here, once. Then the function is traced from the state the call started in: the
// gradients the eager run assigned are swapped back for the trace, and forward again after it.
std::vector<Tensor> TracedFunction::trace_call(Call& call) {
  explain_miss(call);
  ++stats_.eager_calls;
  GradUndoLog log;
  const int64_t eager_start = now_ns();
  std::vector<Tensor> out = fn_(call.caller);
  stats_.eager_ns += now_ns() - eager_start;
  log.uninstall();
  log.swap();
  try {
    Entry& e = trace(call.args(), call.reason + call.note, std::move(call.causes),
                     call.bucketing ? &call.bucketed : nullptr);
    if (call.bucketing && call.bucketed.length >= e.shortest_served)
      check_trimmed_shapes(e, out, call.bucketed);
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

TracedFunction::Entry& TracedFunction::trace(const std::vector<Arg>& args, std::string reason,
                                             std::vector<graph::RetraceCause> causes,
                                             const graph::BucketedCall* bucketed) {
  TraceRecord rec;
  rec.call = stats_.calls;
  rec.reason = std::move(reason);
  rec.causes = std::move(causes);
  Entry entry;
  entry.signature = graph::Signature::of(args);
  rec.signature = entry.signature.str(signature_names(bucketed != nullptr, args.size()));
  graph::Graph g;
  Recording recording;
  {
    ScopedTimer timer(Counter::TraceNs, "trace", options_.name);
    record_graph(args, g, entry, bucketed, &recording);
    rec.trace_ns = timer.stop();
  }
  Ledger::global().add(Counter::Traces, 1);
  const graph::Graph recorded = bucketed ? g : graph::Graph{};  // what the bucket probe runs
  graph::restore_written_constants(g);
  optimize(g, rec);
  plan(entry, std::move(g), rec);
  if (bucketed) probe(entry, recorded, recording, *bucketed, rec);
  entry.agreed = !graph::has_external_effects(entry.plan->graph());
  ++stats_.traces;
  if (stats_.records.size() == TraceStats::kMaxRecords) {
    stats_.records.erase(stats_.records.begin());
    ++stats_.records_dropped;
  }
  stats_.records.push_back(rec);
  Entry& cached = cache(std::move(entry));
  warn_if_retracing(args, rec);
  return cached;
}

void TracedFunction::optimize(graph::Graph& g, TraceRecord& rec) const {
  ScopedTimer timer(Counter::OptimizeNs, "optimize", options_.name);
  if (options_.optimize) {
    const graph::PassStats ps = graph::run_passes(g);
    rec.nodes_removed = ps.dead_nodes_removed;
    rec.copies_elided = ps.copies_elided;
  }
  rec.optimize_ns = timer.stop();
  rec.nodes = static_cast<int>(g.nodes.size());
}

void TracedFunction::plan(Entry& entry, graph::Graph g, TraceRecord& rec) const {
  // Captured tensors still alive now are the caller's (parameters, optimizer state): each
  // call checks they still own the storage the graph uses. Temporaries (constants made while
  // tracing, views) are gone by now and their storage belongs to the graph.
  for (const graph::Buffer& b : g.buffers) {
    if (b.kind != graph::BufferKind::External) continue;
    for (const graph::Owner& o : b.owners)
      if (auto owner = o.tensor.lock())
        entry.captured.push_back(
            {o.tensor, owner.get(), b.storage.get(), o.requires_grad, b.label});
  }
  Ledger& ledger = Ledger::global();
  const int64_t tune_before = ledger.get(Counter::AutotuneNs);
  entry.plan = std::make_unique<graph::Plan>(std::move(g));
  const graph::Plan& p = *entry.plan;
  rec.autotune_ns = ledger.get(Counter::AutotuneNs) - tune_before;
  rec.plan_ns = p.times().plan_ns;
  rec.capture_ns = p.times().capture_ns;
  rec.instantiate_ns = p.times().instantiate_ns;
  rec.arena_bytes = p.memory().arena_bytes;
  rec.intermediate_bytes = p.memory().intermediate_bytes;
  rec.peak_live_bytes = p.memory().peak_live_bytes;
  // What the cache budget counts: the arena, and the buffers only the graph holds.
  entry.bytes = p.memory().arena_bytes;
  for (const graph::Buffer& b : p.graph().buffers)
    if (graph_owned(b)) entry.bytes += b.nbytes;
}

// Is the bucket's graph exact for every length it serves? Refuses it otherwise (graph/probe.h);
// its time counts as plan time.
void TracedFunction::probe(Entry& entry, const graph::Graph& recorded, Recording& recording,
                           const graph::BucketedCall& bucketed, TraceRecord& rec) {
  ScopedTimer timer(Counter::PlanNs, "probe", options_.name);
  graph::BucketProbe p =
      bucket_probe(recorded, recording, std::move(entry.trim), options_.shapes, bucketed);
  if (!graph::has_external_effects(entry.plan->graph())) p.plan = entry.plan.get();
  graph::ProbeResult r = graph::probe_bucket(p);
  entry.trim = std::move(r.trims);
  entry.shortest_served = r.shortest_served;
  rec.plan_ns += timer.stop();
}

// Caches a new graph, evicting the least recently used past max_cached graphs or
// max_cached_bytes (the latest graph is kept whatever its size).
TracedFunction::Entry& TracedFunction::cache(Entry entry) {
  cached_bytes_ += entry.bytes;
  cache_.push_front(std::move(entry));
  while (cache_.size() > options_.max_cached ||
         (options_.max_cached_bytes && cached_bytes_ > options_.max_cached_bytes &&
          cache_.size() > 1)) {
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
  return cache_.front();
}

void TracedFunction::check_trimmed_shapes(const Entry& e, const std::vector<Tensor>& eager,
                                          const graph::BucketedCall& b) {
  const std::vector<graph::Value>& outs = e.plan->graph().outputs;
  for (size_t i = 0; i < outs.size() && i < eager.size(); ++i) {
    Shape s = outs[i].shape;
    if (const graph::Trim& t = e.trim[i]; t.axis >= 0)
      s[t.axis] = t.trimmed(s[t.axis], b.length, b.pad());
    if (s == eager[i].shape()) continue;
    const std::string bucket = options_.shapes.str();
    if (last_ == &cache_.front()) last_ = nullptr;
    cached_bytes_ -= cache_.front().bytes;
    cache_.pop_front();
    throw ValueError(detail::cat(
        "[trace] ", bucket, " of '", options_.name, "' cannot be exact: output ", i, " has shape ",
        eager[i].shape().str(), " eagerly but ", s.str(),
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

std::optional<graph::RetraceCause> TracedFunction::stale_reason(const Entry& e) const {
  using K = graph::RetraceCause::Kind;
  for (const Captured& c : e.captured) {
    if (c.owner.expired()) return make_cause(K::CapturedGone, c.label);
    if (c.raw->storage.get() != c.storage) return make_cause(K::ReplacedParameter, c.label);
  }
  for (const GradGuard& g : e.grad_guards)
    if (g.leaf.expired())
      return make_cause(K::GradState, "",
                        "a tensor whose gradient the function read no longer exists");
  // The count only grows: a graph built from a module's former parts never serves again.
  for (const GenerationGuard& g : e.generation_guards) {
    const std::shared_ptr<const Generation> generation = g.generation.lock();
    if (generation && generation->peek() != g.count)
      return make_cause(K::ModuleChanged, generation->label());
  }
  return std::nullopt;
}

std::optional<graph::RetraceCause> TracedFunction::guard_reason(const Entry& e) const {
  using K = graph::RetraceCause::Kind;
  auto flag = [](bool b) { return std::string(b ? "true" : "false"); };
  for (const Captured& c : e.captured)
    if (c.raw->requires_grad != c.requires_grad)
      return make_cause(K::CapturedRequiresGrad, c.label, "", flag(c.requires_grad),
                        flag(c.raw->requires_grad));
  for (const GradGuard& g : e.grad_guards) {
    const TensorImpl* now = g.raw->grad.get();
    if (now == g.expected) continue;
    graph::RetraceCause cause = make_cause(K::GradState, grad_label(*g.raw), "",
                                           g.expected ? "set" : "None", now ? "set" : "None");
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

}  // namespace encore
