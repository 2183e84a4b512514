#include "graph/bucket.h"

#include <algorithm>
#include <cstring>

#include "ops/ops.h"

namespace encore {

ShapePolicy ShapePolicy::bucket(int axis, std::vector<int64_t> sizes, std::vector<int> args) {
  ENCORE_CHECK(!sizes.empty() && !args.empty(), ValueError,
               "[trace] a bucket policy needs sizes and arguments");
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
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

namespace graph {

BucketedCall bucket_call(const ShapePolicy& p, const std::vector<Arg>& call,
                         const std::string& name) {
  BucketedCall b;
  b.length = -1;
  for (int i : p.args) {
    ENCORE_CHECK(
        i >= 0 && static_cast<size_t>(i) < call.size() && std::holds_alternative<Tensor>(call[i]),
        ValueError, "[trace] the bucket policy of '", name, "' names argument ", i,
        ", which is not a tensor argument");
    const Tensor& t = std::get<Tensor>(call[i]);
    b.axis = normalize_axis(p.axis, t.dim(), "trace");
    ENCORE_CHECK(b.length < 0 || t.shape()[b.axis] == b.length, ShapeError,
                 "[trace] bucketed arguments of '", name, "' differ in length along axis ", b.axis);
    b.length = t.shape()[b.axis];
  }
  const auto it = std::lower_bound(p.sizes.begin(), p.sizes.end(), b.length);
  b.bucketed = it != p.sizes.end();
  b.bucket = b.bucketed ? *it : b.length;
  b.shortest = !b.bucketed ? b.length : it == p.sizes.begin() ? 1 : *(it - 1) + 1;
  b.args = call;
  if (b.pad() > 0)
    for (int i : p.args) {
      const Tensor& t = std::get<Tensor>(call[i]);
      Shape zs = t.shape();
      zs[b.axis] = b.pad();
      b.args[i] = concat({t, zeros(zs, t.dtype(), t.device())}, b.axis);
    }
  b.padded_args = p.args;
  b.length_arg = static_cast<int>(b.args.size());
  b.args.emplace_back(full({1}, b.length, DType::Int64, std::get<Tensor>(call[p.args[0]]).device()));
  return b;
}

namespace {

bool same_bits(const Tensor& a, const Tensor& b) {
  if (!(a.shape() == b.shape()) || a.dtype() != b.dtype()) return false;
  const Tensor x = a.contiguous().to(Device::cpu()), y = b.contiguous().to(Device::cpu());
  return std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

// A buffer the plan writes: captured state (parameters, gradients, optimizer moments, generator
// state), seen as whole 4-byte words (every dtype's size is a multiple of 4) and restored before
// each probe, or an argument written in place (`input`, its index), of which each probe writes
// its own copy.
struct Written {
  Tensor words, initial;
  int input = -1;
  std::string label, writer;
};

// The results of one probe: outputs, and the final contents of every written buffer.
struct Probe {
  std::vector<Tensor> outputs;
  std::vector<Tensor> states;
};

}  // namespace

std::vector<Trim> check_bucket_exact(Plan& plan, const ShapePolicy& policy, const BucketedCall& b,
                                     const std::string& name, const std::vector<std::string>& arg_names,
                                     std::vector<Trim> known) {
  const Graph& g = plan.graph();
  known.resize(g.outputs.size());
  std::vector<Trim> trim = known;
  if (!b.bucketed || b.bucket == b.shortest) return trim;  // this bucket never pads

  std::vector<Written> written;
  for (uint32_t k = 0; k < g.buffers.size(); ++k) {
    const Buffer& buf = g.buffers[k];
    const bool captured = buf.kind == BufferKind::External;
    if (!(captured || buf.kind == BufferKind::Input) || !buf.written || buf.nbytes == 0) continue;
    Written w;
    if (captured) {
      const Shape words{static_cast<int64_t>(buf.nbytes / 4)};
      w.words = Tensor::make_view(buf.storage, words, contiguous_strides(words), 0, DType::Int32);
      w.initial = w.words.clone();
    } else {
      // A padded argument's copy differs in its padding by construction: not compared.
      int arg = -1;
      for (int i = 0, tensors = 0; i < static_cast<int>(b.args.size()) && arg < 0; ++i)
        if (std::holds_alternative<Tensor>(b.args[i]) && tensors++ == buf.input) arg = i;
      if (std::find(policy.args.begin(), policy.args.end(), arg) != policy.args.end()) continue;
      w.input = buf.input;
    }
    w.label = buf.label;
    for (const Node& n : g.nodes)
      for (size_t j = 0; j < n.in.size(); ++j)
        if (n.in[j].buffer == k &&
            n.op->writes(static_cast<int>(j), static_cast<int>(n.in.size()), n.attrs))
          w.writer = n.op->name;
    written.push_back(std::move(w));
  }
  auto restore = [&] {
    for (Written& w : written)
      if (w.input < 0) w.words.copy_(w.initial);
  };

  // Every probe keeps the call's values on the first `kept` positions and fills the rest:
  // results that do not depend on the padding agree bit for bit.
  auto probe = [&](int64_t kept, int which) {
    restore();
    std::vector<Tensor> inputs;
    for (size_t i = 0; i < b.args.size(); ++i) {
      const Tensor* t = std::get_if<Tensor>(&b.args[i]);
      if (!t) continue;
      if (static_cast<int>(i) == b.length_arg) {
        inputs.push_back(full({1}, kept, DType::Int64, t->device()));
        continue;
      }
      if (std::find(policy.args.begin(), policy.args.end(), static_cast<int>(i)) ==
          policy.args.end()) {
        // An argument the function writes in place: a copy, so that a probe never writes the
        // caller's tensor (the call itself writes it once, as eager mode does).
        const int k = static_cast<int>(inputs.size());
        const bool writes = std::any_of(written.begin(), written.end(), [&](const Written& w) { return w.input == k; });
        inputs.push_back(writes ? t->clone() : *t);
        continue;
      }
      // Signs and magnitudes differ, so even functions (squares) and maxima see a change; the
      // magnitudes stay where exp() is finite, so a zero gradient times the padding stays 0.
      const double floats[] = {64.0, -64.0, 0.5}, ints[] = {0, 1, 2};
      Shape fs = t->shape();
      fs[b.axis] = b.bucket - kept;
      const double fill = is_floating(t->dtype()) ? floats[which] : ints[which];
      inputs.push_back(
          concat({t->slice(b.axis, 0, kept), full(fs, fill, t->dtype(), t->device())}, b.axis));
    }
    plan.run(inputs);
    Probe p;
    p.outputs = plan.outputs(false);
    for (const Written& w : written) p.states.push_back(w.input < 0 ? w.words.clone() : inputs[w.input]);
    return p;
  };
  auto made_by = [&](size_t i) {
    const Node* made = nullptr;
    for (const Node& n : g.nodes)
      for (const Value& v : n.out)
        if (v.buffer == g.outputs[i].buffer) made = &n;
    return detail::cat("output ", i, made ? detail::cat(" (made by ", made->op->name, ")") : "");
  };

  // Probed at two real lengths (different amounts of padding), so that an output whose length
  // does not shrink one for one with the input's (a strided window) cannot pass by chance.
  std::vector<int64_t> lengths = {b.bucket - std::max<int64_t>(1, (b.bucket - b.shortest + 1) / 2)};
  if (b.pad() > 0 && b.length != lengths[0]) lengths.push_back(b.length);
  std::vector<bool> bad_output(g.outputs.size(), false), bad_state(written.size(), false);
  try {
    for (size_t l = 0; l < lengths.size(); ++l) {
      const int64_t kept = lengths[l], tail = b.bucket - kept;
      const Probe probes[] = {probe(kept, 0), probe(kept, 1), probe(kept, 2)};
      auto agree = [&](auto&& part) {
        return same_bits(part(probes[0]), part(probes[1])) &&
               same_bits(part(probes[0]), part(probes[2]));
      };
      for (size_t i = 0; i < g.outputs.size(); ++i) {
        if (const Trim& k = known[i]; k.axis >= 0) {
          // A layer registered this output as carrying the padded axis: its valid part must
          // not depend on the padding.
          const int64_t valid = k.size(kept);
          if (valid < 0 || valid > g.outputs[i].shape[k.axis] ||
              !agree([&](const Probe& p) { return p.outputs[i].slice(k.axis, 0, valid); }))
            bad_output[i] = true;
          continue;
        }
        int axis = -1;
        auto whole = [&](const Probe& p) { return p.outputs[i]; };
        if (!agree(whole)) {
          // Axes whose trailing `tail` positions hold the padding: the policy's axis first.
          const Shape& shape = g.outputs[i].shape;
          std::vector<int> axes;
          if (b.axis < shape.size()) axes.push_back(b.axis);
          for (int a = 0; a < shape.size(); ++a)
            if (a != b.axis) axes.push_back(a);
          for (int a : axes) {
            if (shape[a] <= tail)
              continue;  // real positions remain on an axis derived from the padded one
            // The padding starts exactly `tail` positions before the end (not earlier, as after
            // a strided window, where trimming `tail` would cut real positions).
            auto head = [&](const Probe& p) { return p.outputs[i].slice(a, 0, shape[a] - tail); };
            auto first = [&](const Probe& p) {
              return p.outputs[i].slice(a, shape[a] - tail, shape[a] - tail + 1);
            };
            if (agree(head) && !agree(first)) {
              axis = a;
              break;
            }
          }
          if (axis < 0) bad_output[i] = true;
        }
        if (l == 0)
          trim[i].axis = axis;
        else if (trim[i].axis != axis)
          bad_output[i] = true;
      }
      for (size_t k = 0; k < written.size(); ++k) {
        auto state = [&](const Probe& p) { return p.states[k]; };
        if (!agree(state)) bad_state[k] = true;
      }
    }
    restore();
  } catch (...) {
    restore();
    throw;
  }
  std::vector<std::string> spoiled;
  for (size_t i = 0; i < g.outputs.size(); ++i)
    if (bad_output[i]) spoiled.push_back(made_by(i));
  for (size_t k = 0; k < written.size(); ++k)
    if (bad_state[k])
      spoiled.push_back(
          "'" + written[k].label + "'" +
          (written[k].writer.empty() ? "" : " (written by " + written[k].writer + ")"));
  if (spoiled.empty()) return trim;
  std::string what;
  const size_t shown = std::min<size_t>(spoiled.size(), 6);
  for (size_t i = 0; i < shown; ++i) what += (i ? ", " : "") + spoiled[i];
  if (shown < spoiled.size()) what += detail::cat(" and ", spoiled.size() - shown, " more");
  std::string args;
  for (size_t i = 0; i < policy.args.size(); ++i) {
    const int a = policy.args[i];
    args += (i ? ", " : "") + (static_cast<size_t>(a) < arg_names.size() && !arg_names[a].empty()
                                   ? arg_names[a]
                                   : "arg " + std::to_string(a));
  }
  throw ValueError(detail::cat("[trace] ", policy.str(), " of '", name, "' cannot be exact: ", what,
                               " depend on the padded positions of ", args, " along axis ", b.axis,
                               " (lengths ", b.shortest, " to ", b.bucket,
                               " share this bucket). Something reads across that axis without masking the padding: "
                               "an op or layer of your own (the built-in layers and losses mask "
                               "with the call's true length, see graph/lengths.h), a reduction "
                               "written with plain ops. Trace exactly (the default policy), or mask "
                               "with graph::lengths_of / mask_sequence"));
}

void trim_outputs(std::vector<Tensor>& out, const std::vector<Trim>& trims, int64_t length, int64_t pad) {
  for (size_t i = 0; i < out.size() && i < trims.size(); ++i)
    if (const int a = trims[i].axis; a >= 0) {
      const int64_t extent = out[i].shape()[a], keep = trims[i].trimmed(extent, length, pad);
      if (keep != extent) out[i] = out[i].slice(a, 0, keep);
    }
}

}  // namespace graph
}  // namespace encore
