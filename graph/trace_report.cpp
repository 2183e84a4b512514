// What traced functions report: the statistics table, the explanation of every trace, the sizes
// each argument axis had, and the retrace warning with its advice (which probes whether a bucket
// policy would be exact before suggesting one).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "graph/trace.h"
#include "ops/ops.h"

namespace encore {

std::string TraceStats::table(const std::string& name) const {
  std::string s = detail::cat("traced function '", name, "': ", calls, " calls, ", hits,
                              " replays, ", eager_calls, " eager first calls, ", traces, " traces",
                              evictions ? detail::cat(", ", evictions, " evicted") : "", "\n");
  char line[512];
  std::snprintf(line, sizeof line, "  %-3s %-6s %9s %9s %9s %9s %6s %11s  %s\n", "#", "call",
                "trace_ms", "plan_ms", "capt_ms", "tune_ms", "nodes", "arena_KiB", "reason");
  s += line;
  if (records_dropped) s += detail::cat("  (", records_dropped, " older traces not shown)\n");
  for (size_t i = 0; i < records.size(); ++i) {
    const TraceRecord& r = records[i];
    std::snprintf(line, sizeof line, "  %-3lld %-6lld %9.3f %9.3f %9.3f %9.3f %6d %11.1f  %s\n",
                  static_cast<long long>(records_dropped + static_cast<int64_t>(i) + 1),
                  static_cast<long long>(r.call), (r.trace_ns + r.optimize_ns) / 1e6,
                  r.plan_ns / 1e6, (r.capture_ns + r.instantiate_ns) / 1e6, r.autotune_ns / 1e6,
                  r.nodes, r.arena_bytes / 1024.0, r.reason.c_str());
    s += line;
  }
  if (real_elements > 0)
    s += detail::cat("  bucketing: ", retraces_saved, " retraces saved; ", padding_elements,
                     " zeros added to ", real_elements, " elements (",
                     100 * padding_elements / real_elements, "% padding)\n");
  if (const int64_t n = break_even_replays(); n != 0) {
    const double trace_ms = [&] {
      double t = 0;
      for (const TraceRecord& r : records) t += r.total_ns() / 1e6;
      return records.empty() ? 0.0 : t / static_cast<double>(records.size());
    }();
    s += n < 0 ? detail::cat("  break-even: never (a replay takes ", replay_ns / 1e6 / hits,
                             " ms, an eager call ", eager_ns / 1e6 / eager_calls, " ms)\n")
               : detail::cat("  break-even: a trace (", trace_ms, " ms) is paid back after ", n,
                             " replays (", replay_ns / 1e6 / hits, " ms each against ",
                             eager_ns / 1e6 / eager_calls, " ms eager)\n");
  }
  return s;
}

int64_t TraceStats::break_even_replays() const {
  if (hits == 0 || eager_calls == 0 || records.empty()) return 0;
  double trace_ns = 0;
  for (const TraceRecord& r : records) trace_ns += static_cast<double>(r.total_ns());
  trace_ns /= static_cast<double>(records.size());
  const double saved =
      static_cast<double>(eager_ns) / eager_calls - static_cast<double>(replay_ns) / hits;
  if (!(saved > 0)) return -1;
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(trace_ns / saved)));
}

std::string TracedFunction::explain() const {
  std::string s;
  if (stats_.records_dropped)
    s += detail::cat("(", stats_.records_dropped, " older traces not shown)\n");
  for (size_t i = 0; i < stats_.records.size(); ++i) {
    const TraceRecord& r = stats_.records[i];
    s += detail::cat("trace ", stats_.records_dropped + static_cast<int64_t>(i) + 1, " (call ",
                     r.call, "): ", r.reason, "\n    signature ", r.signature, "\n");
  }
  return s.empty() ? "no traces yet\n" : s;
}

void TracedFunction::warn_if_retracing(const std::vector<Arg>& args, const TraceRecord& rec) {
  if (options_.retrace_warning <= 0 || stats_.traces <= options_.retrace_warning || warned_) return;
  warned_ = true;
  const std::string msg = detail::cat(
      "[trace] '", options_.name, "' has been traced ", stats_.traces, " times (warning threshold ",
      options_.retrace_warning, "). Latest: ", rec.reason,
      ". Each trace costs tracing and planning time. ", retrace_advice(args, rec.causes));
  if (options_.on_warning)
    options_.on_warning(msg);
  else
    std::fprintf(stderr, "%s\n", msg.c_str());
}

std::string TracedFunction::retrace_advice(const std::vector<Arg>& args,
                                           const std::vector<RetraceCause>& causes) {
  const std::string statics = "Keep values that change every call out of the static arguments.";
  int axis = -1;
  std::vector<int> varying;
  for (const RetraceCause& c : causes) {
    if (c.kind != RetraceCause::Kind::Shape || c.axis < 0 || (axis >= 0 && c.axis != axis))
      return statics;
    axis = c.axis;
    varying.push_back(c.arg);
  }
  if (varying.empty() || options_.shapes.kind == ShapePolicy::Kind::Bucket) return statics;
  // Would a bucket policy be exact? Trace this call as a bucket would (the true length as an
  // input, the layers masking with it) and probe it with its last quarter treated as padding:
  // the same probe a bucket's first trace runs (graph/probe.h).
  const int64_t length = std::get<Tensor>(args[varying[0]]).shape()[axis];
  const ShapePolicy policy = ShapePolicy::bucket(axis, {length}, varying);
  try {
    graph::BucketedCall call = graph::bucket_call(policy, args, options_.name);
    call.shortest = std::max<int64_t>(1, length - std::max<int64_t>(1, length / 4));
    Entry trial;
    graph::Graph g;
    Recording recording;
    record_graph(call.args, g, trial, &call, &recording);
    graph::probe_bucket(bucket_probe(g, recording, trial.trim, policy, call));
  } catch (const Error& refused) {
    return detail::cat(
        "A bucket policy along axis ", axis,
        " would not be exact for this function (it would be refused: ", refused.what(),
        "). Fix the length yourself (pad and mask), or accept the traces.");
  }
  int64_t longest = 0;
  for (const AxisValues& v : axis_values())
    if (v.arg == varying[0] && v.axis == axis) longest = v.counts.back().first;
  std::vector<int64_t> sizes;
  for (int64_t size = 8; sizes.empty() || sizes.back() < longest; size *= 2) sizes.push_back(size);
  std::string args_text;
  for (size_t i = 0; i < varying.size(); ++i)
    args_text += (i ? ", " : "") + std::to_string(varying[i]);
  return detail::cat("Padding along axis ", axis, " is exact for this function: ",
                     ShapePolicy::bucket(axis, sizes, varying).str(), " (arguments ", args_text,
                     ") would serve lengths up to ", sizes.back(), " with ", sizes.size(),
                     " graphs.");
}

void TracedFunction::retire(const Entry& e) {
  count_axis_values(e.signature, e.shortest_served > 0, e.calls, retired_values_);
}

void TracedFunction::count_axis_values(const graph::Signature& s, bool bucket_graph, int64_t calls,
                                       AxisCounts& into) const {
  const ShapePolicy& p = options_.shapes;
  // A bucket's graph: its last argument is the true length, not the caller's.
  const size_t args = s.args.size() - (bucket_graph && !s.args.empty() ? 1 : 0);
  for (size_t i = 0; i < args; ++i) {
    const auto* t = std::get_if<graph::TensorKey>(&s.args[i]);
    if (!t) continue;
    const bool bucketed = bucket_graph && std::find(p.args.begin(), p.args.end(),
                                                    static_cast<int>(i)) != p.args.end();
    for (int a = 0; a < t->shape.size(); ++a)
      if (!(bucketed &&
            a == normalize_axis(p.axis, t->shape.size(), "trace")))  // counted as called
        into[{static_cast<int>(i), a}][t->shape[a]] += calls;
  }
}

std::vector<AxisValues> TracedFunction::axis_values() const {
  AxisCounts all = retired_values_;
  for (const Entry& e : cache_) count_axis_values(e.signature, e.shortest_served > 0, e.calls, all);
  for (const auto& [key, counts] : bucket_lengths_)
    for (const auto& [v, n] : counts) all[key][v] += n;
  std::vector<AxisValues> out;
  for (auto& [key, counts] : all) {
    const auto [arg, axis] = key;
    const std::string name =
        static_cast<size_t>(arg) < options_.arg_names.size() ? options_.arg_names[arg] : "";
    out.push_back({arg, name, axis, {counts.begin(), counts.end()}});
  }
  return out;
}

}  // namespace encore
