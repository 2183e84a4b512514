#include "graph/trace.h"

#include <cstdio>

#include "autograd/grad_mode.h"
#include "core/ledger.h"
#include "graph/passes.h"
#include "graph/tracer.h"
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
  std::string s = detail::cat("traced function '", name, "': ", calls, " calls, ", hits, " hits, ", traces,
                              " traces", evictions ? detail::cat(", ", evictions, " evicted") : "", "\n");
  char line[512];
  std::snprintf(line, sizeof line, "  %-3s %-6s %9s %9s %9s %9s %6s %11s  %s\n", "#", "call", "trace_ms", "plan_ms",
                "capt_ms", "tune_ms", "nodes", "arena_KiB", "reason");
  s += line;
  for (size_t i = 0; i < records.size(); ++i) {
    const TraceRecord& r = records[i];
    std::snprintf(line, sizeof line, "  %-3zu %-6lld %9.3f %9.3f %9.3f %9.3f %6d %11.1f  %s\n", i + 1,
                  static_cast<long long>(r.call), (r.trace_ns + r.optimize_ns) / 1e6, r.plan_ns / 1e6,
                  (r.capture_ns + r.instantiate_ns) / 1e6, r.autotune_ns / 1e6, r.nodes, r.arena_bytes / 1024.0,
                  r.reason.c_str());
    s += line;
  }
  return s;
}

TracedFunction::TracedFunction(Fn fn, TraceOptions options) : fn_(std::move(fn)), options_(std::move(options)) {
  ENCORE_CHECK(fn_, ValueError, "[trace] no function to trace");
  ENCORE_CHECK(options_.max_cached >= 1, ValueError, "[trace] max_cached must be >= 1");
}

std::string TracedFunction::explain() const {
  std::string s;
  for (size_t i = 0; i < stats_.records.size(); ++i) {
    const TraceRecord& r = stats_.records[i];
    s += detail::cat("trace ", i + 1, " (call ", r.call, "): ", r.reason, "\n    signature ", r.signature, "\n");
  }
  return s.empty() ? "no traces yet\n" : s;
}

void TracedFunction::clear() {
  cache_.clear();
  last_ = nullptr;
}

std::string TracedFunction::stale_reason(const Entry& e) const {
  for (const Captured& c : e.captured) {
    if (c.owner.expired()) return "captured tensor '" + c.label + "' no longer exists";
    if (c.raw->storage.get() != c.storage)
      return "storage of captured tensor '" + c.label + "' was replaced (set_data or Module::to)";
  }
  return {};
}

TracedFunction::Entry& TracedFunction::trace(const std::vector<Arg>& args, std::string reason) {
  TraceRecord rec;
  rec.call = stats_.calls;
  rec.reason = std::move(reason);
  Entry entry;
  entry.signature = graph::Signature::of(args);
  rec.signature = entry.signature.str(options_.arg_names);
  graph::Graph g;
  std::vector<std::weak_ptr<TensorImpl>> grad_leaves;
  {
    ScopedTimer timer(Counter::TraceNs, "trace", options_.name);
    graph::Tracer tracer(g);
    std::vector<Arg> symbolic = args;
    int k = 0;
    for (size_t i = 0; i < args.size(); ++i) {
      if (const Tensor* t = std::get_if<Tensor>(&args[i])) {
        const std::string label = i < options_.arg_names.size() ? options_.arg_names[i] : "arg" + std::to_string(i);
        symbolic[i] = tracer.input(k++, t->shape(), t->dtype(), t->device(), t->requires_grad(), label);
      }
    }
    const std::vector<Tensor> out = fn_(symbolic);
    for (size_t i = 0; i < out.size(); ++i) {
      ENCORE_CHECK(out[i].defined(), ValueError, "[trace] '", options_.name, "' returned an undefined tensor as output ", i);
      g.outputs.push_back(tracer.value(out[i], "trace"));
    }
    grad_leaves = tracer.grad_leaves();
    rec.trace_ns = timer.stop();
  }
  Ledger& ledger = Ledger::global();
  ledger.add(Counter::Traces, 1);
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
    for (const auto& w : b.owners)
      if (auto owner = w.lock()) entry.captured.push_back({w, owner.get(), b.storage.get(), b.label});
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
  for (const auto& leaf : grad_leaves)
    if (auto l = leaf.lock()) entry.grads.push_back({leaf, l->grad});

  ++stats_.traces;
  stats_.records.push_back(rec);
  cache_.push_front(std::move(entry));
  while (cache_.size() > options_.max_cached) {
    cache_.pop_back();
    ++stats_.evictions;
  }
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
    if (const Tensor* t = std::get_if<Tensor>(&a)) inputs.push_back(t->is_contiguous() ? *t : t->contiguous());
  e.plan->run(inputs);
  for (const GradBinding& b : e.grads)
    if (auto leaf = b.leaf.lock()) leaf->grad = b.grad;
  std::vector<Tensor> out = e.plan->outputs(options_.alias_outputs);
  last_ = &e;
  Ledger::global().add(Counter::Replays, 1);
  stats_.replay_ns += timer.stop();
  return out;
}

std::vector<Tensor> TracedFunction::operator()(const std::vector<Arg>& call_args) {
  // Called while another function traces: inline into that graph.
  if (graph::Tracer::current()) return fn_(call_args);
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

  std::string reason;
  for (auto it = cache_.begin(); it != cache_.end(); ++it) {
    if (!it->signature.matches(*args)) continue;
    reason = stale_reason(*it);
    if (reason.empty()) {
      ++stats_.hits;
      if (it != cache_.begin()) cache_.splice(cache_.begin(), cache_, it);
      std::vector<Tensor> out = replay(cache_.front(), *args);
      if (pad > 0)
        for (Tensor& o : out)
          if (o.dim() > axis && o.shape()[axis] >= pad) o = o.slice(axis, 0, o.shape()[axis] - pad);
      return out;
    }
    cache_.erase(it);
    break;
  }
  if (reason.empty()) {
    if (cache_.empty()) {
      reason = stats_.traces == 0 ? "first call" : "no cached graph (cleared or evicted)";
    } else {
      const graph::Signature now = graph::Signature::of(*args);
      const Entry* nearest = &cache_.front();
      for (const Entry& e : cache_)
        if (now.distance(e.signature) < now.distance(nearest->signature)) nearest = &e;
      reason = "new signature: " + now.diff(nearest->signature, options_.arg_names);
    }
  }
  Entry& e = trace(*args, reason + bucket_note);
  std::vector<Tensor> out = replay(e, *args);
  if (pad > 0)
    for (Tensor& o : out)
      if (o.dim() > axis && o.shape()[axis] >= pad) o = o.slice(axis, 0, o.shape()[axis] - pad);
  return out;
}

}  // namespace encore
