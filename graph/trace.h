// encore::trace — record a function (typically a whole training step: forward, loss,
// backward, optimizer update) into a static graph keyed by its input signature, and replay
// it. A call with a new signature retraces; every trace is counted, timed and explained.
//
//   auto step = encore::trace([&](const Tensor& x, const Tensor& y) {
//     opt.zero_grad();
//     Tensor loss = nn::binary_crossentropy(y, model(x));
//     loss.backward();
//     opt.step();
//     return loss;
//   }, {.name = "train_step"});
//   for (...) Tensor loss = step(x, y);   // replays after the first call
//
// Semantics:
//  - A call that misses the cache runs the function eagerly (its results are that call's
//    results), so state made on first use — lazily built layers, optimizer slots, generators
//    — exists; then the function is traced, symbolically, from the state the call started
//    in: no kernel runs, tensors made inside have shapes but no values, and reading a value
//    (item(), to_vector(), printing) is an error. Later calls with that signature and state
//    replay. Side effects of the function body (counters, prints) happen only when it runs
//    eagerly or traces.
//  - Tensors the function reads from outside (parameters, optimizer state, generator state)
//    are captured by reference: replays read and update them in place. Replacing one's
//    storage (set_data, Module::to) is detected on the next call, which retraces.
//  - Mode flags the function reads (a module's training flag, nn::Module::is_training) are
//    guards too: after model.eval(), a call replays a graph traced in eval mode, or traces one.
//  - Gradients behave as in eager mode: backward() accumulates into an existing .grad and
//    assigns a missing one. Whether each .grad the function read existed (and which tensor
//    it was) is part of the cache key, so accumulation over several calls, zero_grad inside
//    or outside, and backward without a step all replay exactly. A .grad the function
//    assigned is, after a replay, the parameter's persistent gradient buffer: a reference to
//    it kept from an earlier step sees later values (clone it to keep it).
//  - Arguments keep their layout: a strided argument is read where it is (its strides are
//    part of the signature), so kernels round exactly as they do eagerly. In-place writes to a
//    tensor argument reach the caller's tensor (any strides, any device). An argument that shares
//    memory with another argument or with captured state, where either is written, is an error on
//    replay.
//  - A tensor made inside the trace must not outlive it outside the function (stored in an
//    attribute, or state created while tracing): that is an error naming the tensor. Return
//    it instead.
//  - Outputs are fresh copies by default, on the call that traces too (never the function's
//    own tensors, which may be captured state). With `alias_outputs` they are views of the Plan's
//    buffers: no copy, but the next replay of the same signature overwrites them.
//  - Dropout and other random ops advance their generator inside the graph: every replay
//    draws fresh values, identical to an eager run from the same seed.
//  - Traced calls run one at a time per process (a lock shared by all traced functions), so
//    threads that train one model through traced steps cannot interleave their updates.
//    Eager code on another thread that writes tensors a replay uses is a data race, as any
//    two threads writing one tensor are.
#pragma once

#include "core/cxx20.h"

#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "core/modes.h"
#include "graph/bucket.h"
#include "graph/plan.h"
#include "graph/probe.h"
#include "graph/signature.h"

namespace encore {

namespace graph {
class Tracer;
}
using graph::Arg;

struct TraceOptions {
  std::string name = "traced";
  ShapePolicy shapes = ShapePolicy::exact();
  /// Cached graphs kept (least recently used evicted first).
  size_t max_cached = 32;
  /// Bytes all cached graphs may hold together (arenas plus the buffers a graph owns, such as
  /// constants and their snapshots); 0: no limit. The latest graph is kept whatever its size.
  size_t max_cached_bytes = 0;
  /// Warn once, with the explanation, when the function has traced more than this many
  /// times (0: never).
  int retrace_warning = 8;
  bool alias_outputs = false;
  /// Run graph passes (dead code elimination, copy elision). They never change results.
  bool optimize = true;
  /// Names of the arguments, for explanations ("x", "y").
  std::vector<std::string> arg_names = {};
  /// Receives the retrace warning (default: printed to stderr).
  std::function<void(const std::string&)> on_warning = {};
  /// Frees unreachable objects of the host language (Python's gc.collect) before a trace
  /// reports a tensor made inside it as kept alive: a reference cycle may hold it.
  std::function<void()> collect_garbage = {};
};

using graph::RetraceCause;

/// One trace: why it happened and what it cost.
struct TraceRecord {
  int64_t call = 0;                  // 1-based call number that caused it
  std::string reason;                // the causes as text (and a bucketing note)
  std::vector<RetraceCause> causes;  // why, as data
  std::string signature;
  int64_t trace_ns = 0, optimize_ns = 0, plan_ns = 0, capture_ns = 0, instantiate_ns = 0;
  int64_t autotune_ns = 0;  // per-shape setup (primitive creation / algorithm search) during plan
  int nodes = 0, nodes_removed = 0, copies_elided = 0;
  size_t arena_bytes = 0, intermediate_bytes = 0, peak_live_bytes = 0;
  int64_t total_ns() const {
    return trace_ns + optimize_ns + plan_ns + capture_ns + instantiate_ns;
  }
};

/// The distinct sizes one axis of one tensor argument had over the calls so far (bucketed
/// axes: the lengths as called), with how many calls had each.
struct AxisValues {
  int arg = 0;
  std::string arg_name;
  int axis = 0;
  std::vector<std::pair<int64_t, int64_t>> counts;  // (size, calls), by size
};

struct TraceStats {
  /// eager_calls: calls that missed the cache, run eagerly before the function traced.
  int64_t calls = 0, hits = 0, eager_calls = 0, traces = 0, evictions = 0;
  /// Only the latest kMaxRecords traces keep a record; older ones are counted here.
  static constexpr size_t kMaxRecords = 256;
  int64_t records_dropped = 0;
  int64_t replay_ns = 0;  // total time of the replays (bind, run, outputs)
  int64_t eager_ns = 0;   // total time of the eager first calls
  /// Replays after which a trace has paid for itself: its cost over what a replay saves
  /// against an eager call (from the averages so far); -1: replays save nothing, 0: unknown.
  int64_t break_even_replays() const;
  /// Bucketing: elements of the bucketed arguments as called, and the zeros added to them.
  int64_t real_elements = 0, padding_elements = 0;
  /// Bucketing: calls with a length not seen before that replayed a bucket's graph (each
  /// would have traced under the exact policy).
  int64_t retraces_saved = 0;
  std::vector<TraceRecord> records;
  /// A printable summary with one line per trace and its reason.
  std::string table(const std::string& name) const;
};

class TracedFunction {
 public:
  using Fn = std::function<std::vector<Tensor>(const std::vector<Arg>&)>;
  TracedFunction(Fn fn, TraceOptions options = {});

  std::vector<Tensor> operator()(const std::vector<Arg>& args);

  const TraceStats& stats() const { return stats_; }
  const TraceOptions& options() const { return options_; }
  /// Every trace so far with its reason, as text.
  std::string explain() const;
  /// The Plan replayed last (null before the first call): its graph, memory plan, steps.
  const graph::Plan* last_plan() const { return last_ ? last_->plan.get() : nullptr; }
  size_t cache_size() const { return cache_.size(); }
  /// Bytes the cached graphs hold (what max_cached_bytes limits).
  size_t cached_bytes() const { return cached_bytes_; }
  /// Per tensor argument axis, the sizes seen so far with their call counts.
  std::vector<AxisValues> axis_values() const;
  /// The lock every traced call holds: hold it to inspect a traced function (stats, plans)
  /// that another thread may be calling.
  static std::unique_lock<std::recursive_mutex> lock_calls();
  /// Drops every cached graph (statistics are kept).
  void clear();

 private:
  struct Captured {
    std::weak_ptr<TensorImpl> owner;
    const TensorImpl* raw;
    const Storage* storage;
    bool requires_grad;  // the graph's backward pass depends on it
    std::string label;
  };
  // A .grad slot the function read before writing it: the value it saw.
  struct GradGuard {
    std::weak_ptr<TensorImpl> leaf;
    const TensorImpl* raw;
    const TensorImpl* expected;
  };
  // A .grad slot the function assigned: its value after the function, re-applied per replay.
  struct GradWrite {
    std::weak_ptr<TensorImpl> leaf;
    TensorImpl* raw;
    std::shared_ptr<TensorImpl> grad;
  };
  // A mode flag (a module's training flag) the function read: the value it saw.
  struct FlagGuard {
    std::weak_ptr<const ModeFlag> flag;
    bool value;
  };
  // A module whose forward ran while tracing: its children and parameters as they were then.
  struct GenerationGuard {
    std::weak_ptr<const Generation> generation;
    uint64_t count;
  };
  struct Entry {
    graph::Signature signature;
    std::unique_ptr<graph::Plan> plan;
    std::vector<Captured> captured;
    std::vector<GradGuard> grad_guards;
    std::vector<GradWrite> grad_writes;
    std::vector<graph::Trim> trim;  // bucketing: how each output is trimmed back
    int64_t shortest_served = 0;    // bucketing: shorter calls are traced exactly
    int64_t calls = 1;              // calls with this signature (the first ran eagerly)
    size_t bytes = 0;               // arena plus graph-owned buffers
    bool agreed = true;  // false: has external effects, the ranks' agreement not yet checked
    std::vector<FlagGuard> flag_guards;
    std::vector<GenerationGuard> generation_guards;
  };
  // One call on its way through the phases: what the graph takes (the caller's arguments, or
  // the padded ones and the true length) and, on a miss, why.
  struct Call {
    explicit Call(const std::vector<Arg>& args) : caller(args) {}
    const std::vector<Arg>& caller;
    graph::BucketedCall bucketed;
    bool bucketing = false;   // false: the caller's arguments as they are
    bool new_length = false;  // bucketing: a length not called before
    std::string note;         // bucketing: appended to the reason of a trace
    std::vector<graph::RetraceCause> causes;
    std::string reason;  // the causes as text
    const std::vector<Arg>& args() const { return bucketing ? bucketed.args : caller; }
  };
  // What one recording produced besides its graph.
  struct Recording {
    std::vector<graph::Registered> registered;  // bucketing: tensors carrying the padded axis
    bool inexact = false;  // bucketing: a layer noted it is exact in distribution only
  };
  using AxisCounts = std::map<std::pair<int, int>, std::map<int64_t, int64_t>>;

  // The phases of a call (graph/trace.cpp).
  Call signature_of(const std::vector<Arg>& call_args);
  Entry* lookup(Call& call);
  void serve_exactly(Call& call, int64_t shortest);
  void count_bucketed(Call& call, int sign);
  void explain_miss(Call& call) const;
  std::vector<Tensor> replay_call(Entry& e, const Call& call);
  std::vector<Tensor> trace_call(Call& call);
  // The phases of a trace (graph/trace.cpp).
  Entry& trace(const std::vector<Arg>& args, std::string reason,
               std::vector<graph::RetraceCause> causes, const graph::BucketedCall* bucketed);
  void optimize(graph::Graph& g, TraceRecord& rec) const;
  void plan(Entry& entry, graph::Graph g, TraceRecord& rec) const;
  void probe(Entry& entry, const graph::Graph& recorded, Recording& recording,
             const graph::BucketedCall& bucketed, TraceRecord& rec);
  Entry& cache(Entry entry);
  void agree(Entry& e) const;
  void check_trimmed_shapes(const Entry& e, const std::vector<Tensor>& eager,
                            const graph::BucketedCall& b);
  std::vector<Tensor> replay(Entry& e, const std::vector<Arg>& args);
  std::optional<graph::RetraceCause> stale_reason(const Entry& e) const;
  std::optional<graph::RetraceCause> guard_reason(const Entry& e) const;
  std::vector<std::string> signature_names(bool bucketed, size_t args) const;
  // The trace itself (graph/trace_record.cpp).
  void record_graph(const std::vector<Arg>& args, graph::Graph& g, Entry& entry,
                    const graph::BucketedCall* bucketed, Recording* recording = nullptr);
  void warn_inexact(Recording* recording);
  void record_grad_slots(graph::Tracer& tracer, Entry& entry);
  void check_escapes(const graph::Tracer& tracer, const graph::Graph& g) const;
  graph::Graph record_unpadded(const std::vector<Arg>& args);
  graph::BucketProbe bucket_probe(const graph::Graph& recorded, Recording& recording,
                                  std::vector<graph::Trim> known, const ShapePolicy& policy,
                                  const graph::BucketedCall& b);
  // Reports (graph/trace_report.cpp).
  void warn_if_retracing(const std::vector<Arg>& args, const TraceRecord& rec);
  std::string retrace_advice(const std::vector<Arg>& args, const std::vector<RetraceCause>& causes);
  void retire(const Entry& e);
  void count_axis_values(const graph::Signature& s, bool bucket_graph, int64_t calls,
                         AxisCounts& into) const;

  Fn fn_;
  TraceOptions options_;
  TraceStats stats_;
  std::list<Entry> cache_;    // most recently used first
  std::list<Entry> evicted_;  // the latest evicted graphs, without their Plans: to explain retraces
  AxisCounts retired_values_;  // calls of signatures no longer cached
  AxisCounts bucket_lengths_;  // bucketed axes: the lengths as called
  size_t cached_bytes_ = 0;
  Entry* last_ = nullptr;
  bool warned_ = false;
  std::vector<std::string>
      inexact_warned_;   // the bucket's inexact notes warned about (graph/lengths.h)
  bool active_ = false;  // a call is running (re-entry from its own eager run runs plainly)
};

namespace detail {

template <class T> struct callable_traits : callable_traits<decltype(&T::operator())> {};
template <class C, class R, class... A> struct callable_traits<R (C::*)(A...) const> {
  using result = R;
  using args = std::tuple<std::decay_t<A>...>;
};
template <class C, class R, class... A> struct callable_traits<R (C::*)(A...)> {
  using result = R;
  using args = std::tuple<std::decay_t<A>...>;
};
template <class R, class... A> struct callable_traits<R (*)(A...)> {
  using result = R;
  using args = std::tuple<std::decay_t<A>...>;
};

template <class T> Arg to_arg(const T& v) {
  if constexpr (std::is_same_v<T, Tensor> || std::is_same_v<T, bool>)
    return v;
  else if constexpr (std::is_integral_v<T>)
    return static_cast<int64_t>(v);
  else if constexpr (std::is_floating_point_v<T>)
    return static_cast<double>(v);
  else
    return std::string(v);
}

template <class T> T from_arg(const Arg& a, size_t i) {
  auto get = [&]<class V>() -> const V& {
    const V* v = std::get_if<V>(&a);
    ENCORE_CHECK(v, DTypeError, "[trace] argument ", i,
                 " has the wrong type for the traced function");
    return *v;
  };
  if constexpr (std::is_same_v<T, Tensor> || std::is_same_v<T, bool> ||
                std::is_same_v<T, std::string>)
    return get.template operator()<T>();
  else if constexpr (std::is_integral_v<T>)
    return static_cast<T>(get.template operator()<int64_t>());
  else if constexpr (std::is_floating_point_v<T>)
    return static_cast<T>(get.template operator()<double>());
  else
    static_assert(sizeof(T) == 0,
                  "traced arguments: Tensor, integers, floats, bool or std::string");
}

inline std::vector<Tensor> to_outputs(const Tensor& t) { return {t}; }
inline std::vector<Tensor> to_outputs(std::vector<Tensor> v) { return v; }
template <class... T> std::vector<Tensor> to_outputs(const std::tuple<T...>& t) {
  return std::apply([](const auto&... x) { return std::vector<Tensor>{x...}; }, t);
}
template <class A, class B> std::vector<Tensor> to_outputs(const std::pair<A, B>& p) {
  return {p.first, p.second};
}

template <class R> R from_outputs(std::vector<Tensor>&& out) {
  if constexpr (std::is_void_v<R>)
    return;
  else if constexpr (std::is_same_v<R, Tensor>)
    return std::move(out[0]);
  else if constexpr (std::is_same_v<R, std::vector<Tensor>>)
    return std::move(out);
  else if constexpr (std::is_same_v<R, std::pair<Tensor, Tensor>>)
    return {out[0], out[1]};
  else
    return [&]<size_t... I>(std::index_sequence<I...>) { return R{out[I]...}; }
  (std::make_index_sequence<std::tuple_size_v<R>>{});
}

}  // namespace detail

/// A traced C++ callable with its typed signature.
template <class F> class Traced {
  using Traits = detail::callable_traits<F>;
  using Result = std::decay_t<typename Traits::result>;
  static constexpr size_t kArity = std::tuple_size_v<typename Traits::args>;

 public:
  Traced(F fn, TraceOptions options)
      : fn_(std::make_shared<TracedFunction>(wrap(std::move(fn), options.name),
                                             std::move(options))) {}

  template <class... A> Result operator()(const A&... args) {
    static_assert(sizeof...(A) == kArity, "wrong number of arguments for the traced function");
    return detail::from_outputs<Result>((*fn_)({detail::to_arg(args)...}));
  }

  TracedFunction& function() { return *fn_; }
  const TraceStats& stats() const { return fn_->stats(); }
  std::string explain() const { return fn_->explain(); }

 private:
  static TracedFunction::Fn wrap(F fn, std::string name) {
    return [fn = std::move(fn), name](const std::vector<Arg>& a) mutable -> std::vector<Tensor> {
      ENCORE_CHECK(a.size() == kArity, ValueError, "[trace] '", name, "' takes ", kArity,
                   " arguments, got ", a.size());
      return [&]<size_t... I>(std::index_sequence<I...>)->std::vector<Tensor> {
        using Args = typename Traits::args;
        if constexpr (std::is_void_v<Result>) {
          fn(detail::from_arg<std::tuple_element_t<I, Args>>(a[I], I)...);
          return {};
        } else {
          return detail::to_outputs(
              fn(detail::from_arg<std::tuple_element_t<I, Args>>(a[I], I)...));
        }
      }
      (std::make_index_sequence<kArity>{});
    };
  }

  std::shared_ptr<TracedFunction> fn_;
};

/// Traces `fn` (a lambda or function taking Tensors and static values, returning a Tensor,
/// a tuple/pair/vector of Tensors, or nothing).
template <class F> Traced<F> trace(F fn, TraceOptions options = {}) {
  return Traced<F>(std::move(fn), std::move(options));
}

}  // namespace encore
