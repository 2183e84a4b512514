// The trace phase of a traced call: the function runs once more with symbolic arguments while a
// Tracer records every op into a Graph (graph/tracer.h); what the function read (mode flags,
// module structure, .grad slots) becomes the guards of its cache entry, and a bucketed trace also
// records which tensors carry the padded axis, for the bucket probe (graph/probe.h).
#include <algorithm>
#include <cstdio>

#include "core/modes.h"
#include "graph/lengths.h"
#include "graph/trace.h"
#include "graph/tracer.h"
#include "ops/dispatch.h"

namespace encore {

namespace {

// Records the value of every mode flag read while the function traces (passing reads on to an
// outer observer): each becomes a guard of the cache entry.
class FlagLog final : public ModeFlagObserver {
 public:
  using Flags = std::vector<std::pair<std::shared_ptr<const ModeFlag>, bool>>;
  using Generations = std::vector<std::pair<std::shared_ptr<const Generation>, uint64_t>>;
  FlagLog() : previous_(mode_flag_observer()) { set_mode_flag_observer(this); }
  ~FlagLog() override { set_mode_flag_observer(previous_); }
  FlagLog(const FlagLog&) = delete;
  FlagLog& operator=(const FlagLog&) = delete;
  void on_flag_read(const std::shared_ptr<const ModeFlag>& flag, bool value) override {
    if (previous_) previous_->on_flag_read(flag, value);
    if (std::none_of(reads.begin(), reads.end(), [&](const auto& r) { return r.first == flag; }))
      reads.emplace_back(flag, value);
  }
  void on_generation_read(const std::shared_ptr<const Generation>& generation,
                          uint64_t count) override {
    if (previous_) previous_->on_generation_read(generation, count);
    if (std::none_of(generations.begin(), generations.end(),
                     [&](const auto& r) { return r.first == generation; }))
      generations.emplace_back(generation, count);
  }

  Flags reads;
  Generations generations;

 private:
  ModeFlagObserver* previous_;
};

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

// A registration made while a bucket traces (graph/lengths.h), as the probe uses it: where it
// happened, the host formula of its length, and for an internal result whose padded entries no
// reader may use, its value and symbolic length (the probe overwrites those entries).
graph::Registered registration(graph::Tracer& tracer, const Tensor& t, const graph::Lengths& l,
                               bool masked) {
  graph::Registered r;
  r.axis = l.axis;
  r.node = tracer.graph().nodes.size();
  r.of_call = l.of_call;
  const bool symbolic = t.storage()->is_symbolic() && l.length.defined() && l.length.numel() == 1 &&
                        l.length.storage()->is_symbolic();
  if (masked || !symbolic) return r;
  r.value = tracer.value(t, "bucket");
  r.overwrite = tracer.graph().buffers[r.value.buffer].kind == graph::BufferKind::Internal;
  if (r.overwrite) r.length = tracer.value(l.length, "bucket");
  return r;
}

}  // namespace

void TracedFunction::record_graph(const std::vector<Arg>& args, graph::Graph& g, Entry& entry,
                                  const graph::BucketedCall* bucketed, Recording* recording) {
  graph::Tracer tracer(g);
  FlagLog flags;
  try {
    {
      std::vector<Arg> symbolic = args;
      const std::vector<std::string> names = signature_names(bucketed != nullptr, args.size());
      for (size_t i = 0, k = 0; i < args.size(); ++i)
        if (const Tensor* t = std::get_if<Tensor>(&args[i]))
          symbolic[i] = tracer.input(static_cast<int>(k++), *t,
                                     names[i].empty() ? "arg" + std::to_string(i) : names[i]);
      // A bucketed call: the true length is the graph's last input, and the padded arguments
      // carry it (graph/lengths.h) for the layers to mask with.
      std::optional<graph::LengthScope> scope;
      if (bucketed && bucketed->length_arg >= 0) {
        scope.emplace([&](const Tensor& t, const graph::Lengths& l, bool masked) {
          if (recording) recording->registered.push_back(registration(tracer, t, l, masked));
        });
        const Tensor length = std::get<Tensor>(symbolic[bucketed->length_arg]);
        symbolic.erase(symbolic.begin() + bucketed->length_arg);
        for (int i : bucketed->padded_args)
          graph::set_lengths(std::get<Tensor>(symbolic[i]),
                             {length, bucketed->axis, [](int64_t n) { return n; }});
      }
      const std::vector<Tensor> out = fn_(symbolic);
      if (scope) warn_inexact(recording);
      for (size_t i = 0; i < out.size(); ++i) {
        ENCORE_CHECK(out[i].defined(), ValueError, "[trace] '", options_.name,
                     "' returned an undefined tensor as output ", i);
        g.outputs.push_back(tracer.value(out[i], "trace"));
        if (const std::optional<graph::Lengths> l = graph::lengths_of(out[i])) {
          entry.trim.resize(out.size());
          entry.trim[i] = {l->axis, l->of_call};
        }
      }
    }  // the function's symbolic tensors die here, unless something outside keeps them
    for (const auto& [flag, value] : flags.reads) entry.flag_guards.push_back({flag, value});
    for (const auto& [generation, count] : flags.generations)
      entry.generation_guards.push_back({generation, count});
    record_grad_slots(tracer, entry);
    tracer.uninstall();
    // Nothing ran: the caller's gradients stay as they were (a replay applies the new ones).
    tracer.restore_grads();
    check_escapes(tracer, g);
  } catch (...) {
    tracer.uninstall();
    tracer.restore_grads();
    throw;
  }
}

void TracedFunction::warn_inexact(Recording* recording) {
  for (const std::string& why : graph::inexact_notes()) {
    if (recording) recording->inexact = true;
    if (std::find(inexact_warned_.begin(), inexact_warned_.end(), why) != inexact_warned_.end())
      continue;
    inexact_warned_.push_back(why);
    const std::string msg =
        detail::cat("[trace] '", options_.name,
                    "' under its bucket policy is exact in distribution only: ", why);
    if (options_.on_warning)
      options_.on_warning(msg);
    else
      std::fprintf(stderr, "%s\n", msg.c_str());
  }
}

// The .grad slots the function read first become guards; those it assigned are re-applied by
// each replay, through the leaf's persistent buffer when the gradient exists only in the graph.
void TracedFunction::record_grad_slots(graph::Tracer& tracer, Entry& entry) {
  for (const graph::GradSlot& slot : tracer.grad_slots()) {
    const std::shared_ptr<TensorImpl> leaf = slot.leaf.lock();
    if (!leaf) continue;
    if (slot.read_first) entry.grad_guards.push_back({leaf, leaf.get(), slot.before.get()});
    if (!slot.written) continue;
    std::shared_ptr<TensorImpl> grad = leaf->grad;
    if (grad && grad->storage->is_symbolic()) {
      // The graph writes it into the leaf's persistent buffer (copy elision usually removes the
      // copy).
      const Tensor buffer = persistent_grad(*leaf);
      const Tensor in[] = {buffer, Tensor(grad)};
      tracer.record(copy_inplace_op_def(), {}, in, {});
      grad = buffer.impl_ptr();
    }
    entry.grad_writes.push_back({leaf, leaf.get(), std::move(grad)});
  }
}

// A symbolic tensor still referenced after the trace (stored in an attribute, a list, or state
// created while tracing) would have values only inside replays: an error naming it.
void TracedFunction::check_escapes(const graph::Tracer& tracer, const graph::Graph& g) const {
  int64_t escaped = tracer.escaped_buffer();
  if (escaped >= 0 && options_.collect_garbage) {
    options_.collect_garbage();
    escaped = tracer.escaped_buffer();
  }
  if (escaped < 0) return;
  std::string made_by = "an argument";
  for (const graph::Node& n : g.nodes)
    for (const graph::Value& v : n.out)
      if (v.buffer == escaped) made_by = std::string("the result of ") + n.op->name;
  throw ValueError(detail::cat(
      "[trace] '", options_.name, "' keeps a tensor made inside the trace (", made_by, ", buffer ",
      g.buffers[escaped].label,
      ") alive after returning: stored in an attribute or a list, or state created while "
      "tracing (an optimizer slot, a layer built inside the function). Its values exist only "
      "inside replays, so "
      "eager and traced runs would differ. Return it from the function, or create that state "
      "before the traced "
      "call"));
}

std::vector<std::string> TracedFunction::signature_names(bool bucketed, size_t args) const {
  std::vector<std::string> names = options_.arg_names;
  names.resize(args);
  if (bucketed && args > 0)
    names.back() = "length";  // the true length, the last argument (graph/bucket.h)
  return names;
}

graph::Graph TracedFunction::record_unpadded(const std::vector<Arg>& args) {
  Entry scratch;
  graph::Graph g;
  record_graph(args, g, scratch, nullptr);
  return g;
}

graph::BucketProbe TracedFunction::bucket_probe(const graph::Graph& recorded, Recording& recording,
                                                std::vector<graph::Trim> known,
                                                const ShapePolicy& policy,
                                                const graph::BucketedCall& b) {
  graph::BucketProbe p;
  p.graph = &recorded;
  p.registered = std::move(recording.registered);
  p.known = std::move(known);
  p.policy = &policy;
  p.call = &b;
  p.name = options_.name;
  p.arg_names = options_.arg_names;
  p.exact_in_distribution_only = recording.inexact;
  p.trace_unpadded = [this](const std::vector<Arg>& args) { return record_unpadded(args); };
  return p;
}

}  // namespace encore
