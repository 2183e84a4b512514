#include "graph/probe.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>

#include "graph/effects.h"
#include "graph/passes.h"
#include "graph/plan.h"
#include "ops/dispatch.h"
#include "ops/ops.h"
#include "ops/sequence.h"

namespace encore::graph {

namespace {

// The runs of each probe length: as the bucket's calls run (the arguments padded with zeros,
// nothing overwritten), then with the padding of the arguments and of every registered result set
// to 64, -64 and 0.5. Signs and magnitudes differ, so even functions (squares) and maxima see a
// change; the magnitudes stay where exp() is finite, so a zero gradient times the padding stays
// zero. Integer arguments (ids) take small values.
constexpr int kRuns = 4;
double fill_value(DType t, int run) {
  constexpr double floats[kRuns] = {0.0, 64.0, -64.0, 0.5}, ints[kRuns] = {0, 1, 2, 1};
  return is_floating(t) ? floats[run] : ints[run];
}

bool same_bits(const Tensor& a, const Tensor& b) {
  if (!(a.shape() == b.shape()) || a.dtype() != b.dtype()) return false;
  const Tensor x = a.contiguous().to(Device::cpu()), y = b.contiguous().to(Device::cpu());
  return std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

// The largest magnitude among `values` (finite elements of floating tensors).
double magnitude(const std::vector<Tensor>& values) {
  double m = 0;
  for (const Tensor& t : values) {
    if (!t.defined() || !is_floating(t.dtype()) || t.numel() == 0) continue;
    const Tensor a = t.to(DType::Float64).contiguous().to(Device::cpu());
    const auto* x = static_cast<const double*>(a.data_ptr());
    for (int64_t i = 0; i < a.numel(); ++i)
      if (std::isfinite(x[i])) m = std::max(m, std::abs(x[i]));
  }
  return m;
}

// How far `got` is from `want`: the largest difference over the larger of `scale` and the
// tensors' own magnitude (0: equal; infinity: another shape or dtype, a NaN or an infinity in one
// place only, or integers that differ).
double relative_difference(const Tensor& got, const Tensor& want, double scale) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (!(got.shape() == want.shape()) || got.dtype() != want.dtype()) return kInf;
  if (!is_floating(got.dtype())) return same_bits(got, want) ? 0 : kInf;
  const Tensor a = got.to(DType::Float64).contiguous().to(Device::cpu());
  const Tensor b = want.to(DType::Float64).contiguous().to(Device::cpu());
  const auto* x = static_cast<const double*>(a.data_ptr());
  const auto* y = static_cast<const double*>(b.data_ptr());
  double diff = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    if (!std::isfinite(x[i]) || !std::isfinite(y[i])) {
      if (!(x[i] == y[i] || (std::isnan(x[i]) && std::isnan(y[i])))) return kInf;
      continue;
    }
    diff = std::max(diff, std::abs(x[i] - y[i]));
    scale = std::max({scale, std::abs(x[i]), std::abs(y[i])});
  }
  return diff == 0 ? 0 : diff / std::max(scale, 1e-300);
}

// What the bucket's graph may differ by from the unpadded one, relative to the largest magnitude
// among its results: a GEMM or convolution over the padded length sums the same terms in another
// blocking (a few ulps, grown by a step or two), in the lowest precision the graph computes in (a
// float64 metric accumulates float32 values). Relative to all results, not each one's own: a
// gradient that cancels to rounding noise (a bias before a normalization) differs in its noise.
double tolerance(const Graph& g) {
  for (const Node& n : g.nodes)
    for (const Value& v : n.out)
      if (v.dtype == DType::Float32) return 1e-4;
  return 1e-10;
}

bool is_padded(const ShapePolicy& p, int arg) {
  return std::find(p.args.begin(), p.args.end(), arg) != p.args.end();
}

// A buffer the probe compares: captured state that a graph writes (seen as whole 4-byte words,
// every dtype's size being a multiple of 4, restored before each run), or an argument written in
// place (`input`, its tensor index), of which each run writes its own copy.
struct Written {
  const Storage* storage = nullptr;
  Tensor words, initial, values;  // values: the same memory as its owner's dtype
  int input = -1;
  bool callers = true;  // the caller's state (compared with the unpadded graph too)
  std::string label, writer;
};

class States {
 public:
  // Adds what `g` writes (the bucket's graph, then the unpadded one), except the padded
  // arguments (their copies differ in the padding by construction).
  void add(const Graph& g, const BucketedCall& b, const ShapePolicy& policy) {
    for (uint32_t k = 0; k < g.buffers.size(); ++k) {
      const Buffer& buf = g.buffers[k];
      if (!buf.written || buf.nbytes == 0) continue;
      Written w;
      if (buf.kind == BufferKind::External) {
        if (find_storage(buf.storage.get())) continue;
        w.storage = buf.storage.get();
        const Shape words{static_cast<int64_t>(buf.nbytes / 4)};
        w.words = Tensor::make_view(buf.storage, words, contiguous_strides(words), 0, DType::Int32);
        w.initial = w.words.clone();
        // The caller's state is compared in value as its owner's dtype (a parameter, a moment).
        for (const Owner& o : buf.owners)
          if (const auto owner = o.tensor.lock(); owner && !w.values.defined()) {
            const Shape n{static_cast<int64_t>(buf.nbytes / itemsize(owner->dtype))};
            w.values = Tensor::make_view(buf.storage, n, contiguous_strides(n), 0, owner->dtype);
          }
        w.callers = w.values.defined();
      } else if (buf.kind == BufferKind::Input) {
        if (is_padded(policy, arg_of(b, buf.input)) || writes_input(buf.input)) continue;
        w.input = buf.input;
      } else {
        continue;
      }
      w.label = buf.label;
      for (const Node& n : g.nodes)
        for (size_t j = 0; j < n.in.size(); ++j)
          if (n.in[j].buffer == k &&
              n.op->writes(static_cast<int>(j), static_cast<int>(n.in.size()), n.attrs))
            w.writer = n.op->name;
      all_.push_back(std::move(w));
    }
  }
  void restore() {
    for (Written& w : all_)
      if (w.input < 0) w.words.copy_(w.initial);
  }
  bool writes_input(int k) const {
    return std::any_of(all_.begin(), all_.end(), [&](const Written& w) { return w.input == k; });
  }
  // The final value of each, after a run on `inputs`.
  std::vector<Tensor> read(const std::vector<Tensor>& inputs) const {
    std::vector<Tensor> v;
    for (const Written& w : all_)
      v.push_back(w.input >= 0 ? inputs[w.input].clone()
                               : (w.values.defined() ? w.values : w.words).clone());
    return v;
  }
  const std::vector<Written>& all() const { return all_; }

 private:
  static int arg_of(const BucketedCall& b, int tensor_index) {
    for (int i = 0, tensors = 0; i < static_cast<int>(b.args.size()); ++i)
      if (std::holds_alternative<Tensor>(b.args[i]) && tensors++ == tensor_index) return i;
    return -1;
  }
  bool find_storage(const Storage* s) const {
    return std::any_of(all_.begin(), all_.end(), [&](const Written& w) { return w.storage == s; });
  }
  std::vector<Written> all_;
};

// One run: the outputs and the final value of every compared buffer.
struct Run {
  std::vector<Tensor> outputs, states;
};

Run run(Plan& plan, std::vector<Tensor> inputs, States& states) {
  states.restore();
  // Arguments the function writes in place: a copy each run, so that a probe never writes the
  // caller's tensor (the call itself writes it once, as eager mode does).
  for (size_t k = 0; k < inputs.size(); ++k)
    if (states.writes_input(static_cast<int>(k))) inputs[k] = copy_with_layout(inputs[k]);
  plan.run(inputs);
  return {plan.outputs(false), states.read(inputs)};
}

// The padded graph's inputs at length `kept` for run `which`: the call's values on the first
// `kept` positions of the padded arguments, then the run's fill (zeros as called); the length
// input says `kept`.
std::vector<Tensor> padded_inputs(const BucketedCall& b, const ShapePolicy& policy, int64_t kept,
                                  int which) {
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < b.args.size(); ++i) {
    const Tensor* t = std::get_if<Tensor>(&b.args[i]);
    if (!t) continue;
    if (static_cast<int>(i) == b.length_arg) {
      inputs.push_back(full({1}, kept, DType::Int64, t->device()));
    } else if (!is_padded(policy, static_cast<int>(i))) {
      inputs.push_back(*t);
    } else {
      Shape fs = t->shape();
      fs[b.axis] = b.bucket - kept;
      inputs.push_back(concat({t->slice(b.axis, 0, kept),
                               full(fs, fill_value(t->dtype(), which), t->dtype(), t->device())},
                              b.axis));
    }
  }
  return inputs;
}

// The arguments of the call cut to `kept` positions, without padding or length: what the
// unpadded trace records and runs.
std::vector<Arg> unpadded_args(const BucketedCall& b, const ShapePolicy& policy, int64_t kept) {
  std::vector<Arg> args(b.args.begin(), b.args.begin() + b.length_arg);
  for (int i : policy.args) args[i] = std::get<Tensor>(args[i]).slice(b.axis, 0, kept).contiguous();
  return args;
}

std::vector<Tensor> tensors_of(const std::vector<Arg>& args) {
  std::vector<Tensor> v;
  for (const Arg& a : args)
    if (const Tensor* t = std::get_if<Tensor>(&a)) v.push_back(*t);
  return v;
}

// Overwrites the padded entries of a registered value with `fill`, in place: a mask of a
// (contiguous) copy, copied back.
void overwrite_padding(Graph& g, std::vector<Node>& nodes, const Registered& r, double fill) {
  const Value& v = r.value;
  const Device device = g.buffers[v.buffer].device;
  auto internal = [&] {
    Buffer b;
    b.nbytes = v.shape.numel() * itemsize(v.dtype);
    b.device = device;
    b.label = detail::cat("%", g.buffers.size(), ".probe");
    g.buffers.push_back(std::move(b));
    return Value{static_cast<uint32_t>(g.buffers.size() - 1), 0, v.shape,
                 contiguous_strides(v.shape), v.dtype};
  };
  Value src = v;
  if (!is_contiguous(v.shape, v.strides)) {
    src = internal();
    nodes.push_back({&copy_op_def(), {}, {v}, {src}});
  }
  const Value masked = internal();
  nodes.push_back({&op("mask_sequence"), SequenceAttrs{r.axis, fill}, {src, r.length}, {masked}});
  nodes.push_back({&copy_inplace_op_def(), {}, {v, masked}, {}});
}

bool same_value(const Value& a, const Value& b) {
  return a.buffer == b.buffer && a.offset == b.offset && a.shape == b.shape &&
         a.strides == b.strides;
}

// The graph as a probe runs it: the padded entries of each registered internal result overwritten
// with the fill of run `which` right after the layer that made it (none for run 0 and below, as
// called), external-effect ops replaced by their stand-ins, written constants restored first.
Graph runnable(const Graph& recorded, const std::vector<Registered>& registered, int which) {
  Graph g = recorded;
  std::vector<Node> nodes;
  nodes.reserve(g.nodes.size() + 3 * registered.size());
  std::vector<Value> done;
  size_t next = 0;
  for (const Registered& r : registered) {
    if (which <= 0 || !r.overwrite || r.axis >= r.value.shape.size()) continue;
    while (next < r.node && next < g.nodes.size()) nodes.push_back(std::move(g.nodes[next++]));
    if (std::any_of(done.begin(), done.end(),
                    [&](const Value& v) { return same_value(v, r.value); }))
      continue;
    done.push_back(r.value);
    overwrite_padding(g, nodes, r, fill_value(r.value.dtype, which));
  }
  while (next < g.nodes.size()) nodes.push_back(std::move(g.nodes[next++]));
  g.nodes = std::move(nodes);
  use_stand_ins(g, "the bucket probe");
  restore_written_constants(g);
  return g;
}

// The probe of one bucket: runs, comparisons, and what they found.
class Probe {
 public:
  explicit Probe(const BucketProbe& p) : p_(p), b_(*p.call), g_(*p.graph), known_(p.known) {
    known_.resize(g_.outputs.size());
    trims_ = known_;
    output_why_.resize(g_.outputs.size());
  }

  ProbeResult run_all(int64_t shortest);

 private:
  std::optional<Graph> unpadded_graph(int64_t& shortest, int64_t& kept);
  void build_plans(const std::optional<Graph>& reference);
  Run compare_runs(int64_t kept, bool first);
  void compare_unpadded(int64_t kept, Plan& unpadded, const Run& padded);
  void output_changes(size_t i, const Run (&runs)[kRuns], int64_t kept, bool first);
  Tensor trimmed(size_t i, const Tensor& out, int64_t kept) const;
  std::string output_label(size_t i) const;
  [[noreturn]] void refuse(const std::vector<std::string>& spoiled) const;
  std::vector<std::string> spoiled() const;

  const BucketProbe& p_;
  const BucketedCall& b_;
  const Graph& g_;
  States states_;
  std::vector<std::unique_ptr<Plan>> owned_;
  Plan* plans_[kRuns] = {};  // one per run: as called, then one per overwrite value
  std::unique_ptr<Plan> unpadded_;
  std::vector<Trim> known_, trims_;
  std::vector<std::string> output_why_, state_why_;
};

// The unpadded graph the bucket is compared with: the function traced on the call cut to the
// shortest length the bucket serves (the most padding: a count of the steps or a strided window's
// ceil differs most there). A length the function refuses (eager would) is not served by the
// bucket: `shortest` moves past it and a longer one is tried.
std::optional<Graph> Probe::unpadded_graph(int64_t& shortest, int64_t& kept) {
  for (int attempt = 0; attempt < 3 && shortest < b_.bucket; ++attempt) {
    kept = attempt == 0 ? shortest : attempt == 1 ? (shortest + b_.bucket - 1) / 2 : b_.bucket - 1;
    kept = std::max(kept, shortest);
    try {
      return p_.trace_unpadded(unpadded_args(b_, *p_.policy, kept));
    } catch (const std::exception&) {  // an encore error, or one a Python function raised on it
      shortest = kept + 1;
    }
  }
  shortest = std::max(shortest, b_.bucket);
  return std::nullopt;
}

ProbeResult Probe::run_all(int64_t shortest) {
  int64_t reference_kept = 0;
  std::optional<Graph> reference;
  if (!p_.exact_in_distribution_only && p_.trace_unpadded)
    reference = unpadded_graph(shortest, reference_kept);
  if (shortest >= b_.bucket) return {trims_, shortest};  // no length it serves is padded
  build_plans(reference);
  states_.add(g_, b_, *p_.policy);
  if (reference) states_.add(*reference, b_, *p_.policy);
  // Two lengths (different amounts of padding), so that an output whose length does not shrink
  // one for one with the input's (a strided window) cannot pass by chance: the unpadded graph's
  // (else half way into the bucket), and the call's own (else half way).
  const int64_t half = b_.bucket - std::max<int64_t>(1, (b_.bucket - shortest + 1) / 2);
  std::vector<int64_t> lengths = {reference ? reference_kept : half};
  const int64_t second = b_.length >= shortest && b_.length < b_.bucket ? b_.length : half;
  if (second != lengths[0]) lengths.push_back(second);
  try {
    const Run as_called = compare_runs(lengths[0], true);
    if (lengths.size() > 1) (void)compare_runs(lengths[1], false);
    if (unpadded_) compare_unpadded(reference_kept, *unpadded_, as_called);
    states_.restore();
  } catch (...) {
    states_.restore();
    throw;
  }
  if (const std::vector<std::string> bad = spoiled(); !bad.empty()) refuse(bad);
  // An output trimmed by the probes keeps `extent - padding` entries: at least one.
  for (size_t i = 0; i < trims_.size(); ++i)
    if (trims_[i].axis >= 0 && !trims_[i].size)
      shortest = std::max(shortest, b_.bucket - g_.outputs[i].shape[trims_[i].axis] + 1);
  return {trims_, shortest};
}

// The Plans of the runs: the bucket's own as called (its Plan when it has no external effects),
// and one per overwrite value; the unpadded graph's. External-effect ops run their stand-ins.
void Probe::build_plans(const std::optional<Graph>& reference) {
  auto own = [&](Graph g) {
    return owned_.emplace_back(std::make_unique<Plan>(std::move(g))).get();
  };
  try {
    plans_[0] = p_.plan ? p_.plan : own(runnable(g_, p_.registered, -1));
    for (int r = 1; r < kRuns; ++r) plans_[r] = own(runnable(g_, p_.registered, r));
    if (reference) unpadded_ = std::make_unique<Plan>(runnable(*reference, {}, -1));
  } catch (const UnsupportedError& e) {
    throw ValueError(detail::cat("[trace] ", p_.policy->str(), " of '", p_.name,
                                 "' cannot be probed for exactness: ", e.what(),
                                 ". Trace exactly (the default policy)"));
  }
}

// The runs at length `kept` must agree bit for bit on every result; returns the run as called.
Run Probe::compare_runs(int64_t kept, bool first) {
  Run runs[kRuns];
  for (int r = 0; r < kRuns; ++r)
    runs[r] = run(*plans_[r], padded_inputs(b_, *p_.policy, kept, r), states_);
  for (size_t i = 0; i < g_.outputs.size(); ++i) output_changes(i, runs, kept, first);
  state_why_.resize(states_.all().size());
  for (size_t k = 0; k < states_.all().size(); ++k)
    for (int r = 1; r < kRuns; ++r)
      if (!same_bits(runs[0].states[k], runs[r].states[k]))
        state_why_[k] = "changes with the padding";
  return std::move(runs[0]);
}

// Whether output `i` changes with the padding: on its valid part when a layer registered it, else
// whole or on the one axis whose trailing `bucket - kept` positions alone change (found by the
// first length, confirmed by the second).
void Probe::output_changes(size_t i, const Run (&runs)[kRuns], int64_t kept, bool first) {
  auto agree = [&](auto&& part) {
    for (int r = 1; r < kRuns; ++r)
      if (!same_bits(part(runs[0].outputs[i]), part(runs[r].outputs[i]))) return false;
    return true;
  };
  const Shape& shape = g_.outputs[i].shape;
  if (const Trim& k = known_[i]; k.axis >= 0) {
    const int64_t valid = k.size(kept);
    if (valid < 0 || valid > shape[k.axis] ||
        !agree([&](const Tensor& t) { return t.slice(k.axis, 0, valid); }))
      output_why_[i] = "changes with the padding";
    return;
  }
  const int64_t tail = b_.bucket - kept;
  int axis = -1;
  if (!agree([](const Tensor& t) { return t; })) {
    // Axes whose trailing `tail` positions hold the padding: the policy's axis first.
    std::vector<int> axes;
    if (b_.axis < shape.size()) axes.push_back(b_.axis);
    for (int a = 0; a < shape.size(); ++a)
      if (a != b_.axis) axes.push_back(a);
    for (int a : axes) {
      if (shape[a] <= tail)
        continue;  // real positions remain on an axis derived from the padded one
      // The padding starts exactly `tail` positions before the end (not earlier, as after a
      // strided window, where trimming `tail` would cut real positions).
      if (agree([&](const Tensor& t) { return t.slice(a, 0, shape[a] - tail); }) &&
          !agree(
              [&](const Tensor& t) { return t.slice(a, shape[a] - tail, shape[a] - tail + 1); })) {
        axis = a;
        break;
      }
    }
    if (axis < 0) output_why_[i] = "changes with the padding";
  }
  if (first)
    trims_[i].axis = axis;
  else if (trims_[i].axis != axis)
    output_why_[i] = "changes with the padding";
}

Tensor Probe::trimmed(size_t i, const Tensor& out, int64_t kept) const {
  const Trim& t = trims_[i];
  if (t.axis < 0) return out;
  const int64_t keep = t.trimmed(out.shape()[t.axis], kept, b_.bucket - kept);
  return keep < 0 || keep > out.shape()[t.axis] ? Tensor() : out.slice(t.axis, 0, keep);
}

// The padded graph at length `kept` against the unpadded one (what eager computes at that
// length), from the same state: trimmed outputs and the caller's state, in value.
void Probe::compare_unpadded(int64_t kept, Plan& unpadded, const Run& padded) {
  const Run want = run(unpadded, tensors_of(unpadded_args(b_, *p_.policy, kept)), states_);
  std::vector<Tensor> results = want.outputs;
  for (size_t k = 0; k < states_.all().size(); ++k)
    if (states_.all()[k].callers) results.push_back(want.states[k]);
  const double scale = magnitude(results), tol = tolerance(g_);
  auto why = [&](const Tensor& got, const Tensor& expected) -> std::string {
    if (!got.defined() || !(got.shape() == expected.shape()))
      return detail::cat("has shape ", got.defined() ? got.shape().str() : "(none)",
                         " where the call of length ", kept, " without padding has ",
                         expected.shape().str());
    const double d = relative_difference(got, expected, scale);
    if (d <= tol) return "";
    if (std::isinf(d))
      return detail::cat("differs from the call of length ", kept, " without padding");
    char off[32];
    std::snprintf(off, sizeof off, "%.3g%%", d * 100);
    return detail::cat("is ", off, " off the call of length ", kept, " without padding");
  };
  const size_t n = std::min(want.outputs.size(), padded.outputs.size());
  for (size_t i = 0; i < n; ++i)
    if (output_why_[i].empty())
      output_why_[i] = why(trimmed(i, padded.outputs[i], kept), want.outputs[i]);
  for (size_t k = 0; k < states_.all().size(); ++k)
    if (k < state_why_.size() && state_why_[k].empty() && states_.all()[k].callers)
      state_why_[k] = why(padded.states[k], want.states[k]);
  if (want.outputs.size() != padded.outputs.size())
    output_why_[0] = detail::cat("the call of length ", kept, " without padding returns ",
                                 want.outputs.size(), " outputs, not ", padded.outputs.size());
}

std::string Probe::output_label(size_t i) const {
  const Node* made = nullptr;
  for (const Node& n : g_.nodes)
    for (const Value& v : n.out)
      if (v.buffer == g_.outputs[i].buffer) made = &n;
  return detail::cat("output ", i, made ? detail::cat(" (made by ", made->op->name, ")") : "");
}

std::vector<std::string> Probe::spoiled() const {
  std::vector<std::string> bad;
  for (size_t i = 0; i < output_why_.size(); ++i)
    if (!output_why_[i].empty()) bad.push_back(output_label(i) + " " + output_why_[i]);
  for (size_t k = 0; k < state_why_.size(); ++k) {
    if (state_why_[k].empty()) continue;
    const Written& w = states_.all()[k];
    bad.push_back("'" + w.label + "'" + (w.writer.empty() ? "" : " (written by " + w.writer + ")") +
                  " " + state_why_[k]);
  }
  return bad;
}

void Probe::refuse(const std::vector<std::string>& spoiled) const {
  std::string what;
  const size_t shown = std::min<size_t>(spoiled.size(), 6);
  for (size_t i = 0; i < shown; ++i) what += (i ? "; " : "") + spoiled[i];
  if (shown < spoiled.size()) what += detail::cat("; and ", spoiled.size() - shown, " more");
  std::string args;
  for (size_t i = 0; i < p_.policy->args.size(); ++i) {
    const int a = p_.policy->args[i];
    args +=
        (i ? ", " : "") + (static_cast<size_t>(a) < p_.arg_names.size() && !p_.arg_names[a].empty()
                               ? p_.arg_names[a]
                               : "arg " + std::to_string(a));
  }
  throw ValueError(detail::cat("[trace] ", p_.policy->str(), " of '", p_.name,
                               "' cannot be exact: ", what,
                               ". These results depend on the padding of ", args, " along axis ",
                               b_.axis, " (lengths ", b_.shortest, " to ", b_.bucket,
                               " share this bucket): something reads the padded positions (or "
                               "counts them) without masking: an op or "
                               "layer of your own between the built-in layers, a reduction over "
                               "that axis written with plain ops (mean, "
                               "max, softmax), a read of its last position. The built-in layers "
                               "and losses mask with the call's true length "
                               "(graph/lengths.h). Trace exactly (the default policy), or mask "
                               "with graph::lengths_of / mask_sequence"));
}

}  // namespace

int64_t shortest_served(const std::vector<Registered>& registered, const BucketedCall& b) {
  const int64_t shortest = std::max<int64_t>(b.shortest, 1);
  auto fails = [&](int64_t n) {
    return std::any_of(registered.begin(), registered.end(),
                       [&](const Registered& r) { return r.of_call && r.of_call(n) < 1; });
  };
  for (int64_t n = b.bucket; n >= shortest; --n)
    if (fails(n)) return n + 1;
  return shortest;
}

ProbeResult probe_bucket(const BucketProbe& p) {
  const BucketedCall& b = *p.call;
  const int64_t shortest = shortest_served(p.registered, b);
  if (!b.bucketed || shortest >= b.bucket) {
    std::vector<Trim> trims = p.known;
    trims.resize(p.graph->outputs.size());
    return {trims, std::max(shortest, b.bucketed ? shortest : b.bucket)};
  }
  return Probe(p).run_all(shortest);
}

}  // namespace encore::graph
