#include "graph/signature.h"

#include <bit>
#include <charconv>

#include "core/modes.h"
#include "core/threads.h"

namespace encore::graph {

namespace {

std::string key_str(const ArgKey& k) {
  struct {
    std::string operator()(const TensorKey& t) const {
      const bool dense = t.strides == layout_of(t.shape, contiguous_strides(t.shape));
      return t.shape.str() + " " + std::string(name(t.dtype)) + " " + t.device.str() +
             (dense ? "" : " strides " + t.strides.str()) +
             (t.requires_grad ? " requires_grad" : "");
    }
    std::string operator()(int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const {
      // Shortest form that round-trips: two differing values never print alike.
      char buf[32];
      return std::string(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
    }
    std::string operator()(bool v) const { return v ? "true" : "false"; }
    std::string operator()(const std::string& v) const { return "'" + v + "'"; }
  } visitor;
  return std::visit(visitor, k);
}

// Static floats compare by their bits: 0.0 and -0.0 give different graphs (1 / x differs),
// and a NaN argument matches the same NaN instead of retracing on every call.
template <class V> bool same(const V& a, const V& b) {
  if constexpr (std::is_same_v<V, double>)
    return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b);
  else
    return a == b;
}

bool same_key(const ArgKey& a, const ArgKey& b) {
  if (a.index() != b.index()) return false;
  return std::visit([&](const auto& x) { return same(x, std::get<std::decay_t<decltype(x)>>(b)); },
                    a);
}

}  // namespace

Strides layout_of(const Shape& shape, Strides strides) {
  for (int i = 0; i < strides.size(); ++i)
    if (shape[i] == 1) strides[i] = 0;
  return strides;
}

Signature Signature::of(const std::vector<Arg>& args) {
  Signature s;
  s.args.reserve(args.size());
  for (const Arg& a : args) {
    if (const Tensor* t = std::get_if<Tensor>(&a)) {
      ENCORE_CHECK(t->defined(), ValueError, "[trace] a tensor argument is undefined");
      s.args.emplace_back(TensorKey{t->shape(), layout_of(t->shape(), t->strides()), t->dtype(),
                                    t->device(), t->requires_grad()});
    } else {
      std::visit(
          [&](const auto& v) {
            if constexpr (!std::is_same_v<std::decay_t<decltype(v)>, Tensor>)
              s.args.emplace_back(v);
          },
          a);
    }
  }
  s.grad_mode = GradMode::enabled();
  s.training = encore::training();
  s.tf32 = allow_tf32();
  s.threads = num_threads();
  return s;
}

bool Signature::matches(const std::vector<Arg>& call) const {
  if (call.size() != args.size() || grad_mode != GradMode::enabled() ||
      training != encore::training() || tf32 != allow_tf32() || threads != num_threads())
    return false;
  for (size_t i = 0; i < call.size(); ++i) {
    const ArgKey& k = args[i];
    if (const Tensor* t = std::get_if<Tensor>(&call[i])) {
      const TensorKey* tk = std::get_if<TensorKey>(&k);
      if (!tk || !t->defined()) return false;
      const TensorImpl* impl = t->impl();
      if (impl->dtype != tk->dtype || !(impl->device == tk->device) ||
          impl->requires_grad != tk->requires_grad || !(impl->shape == tk->shape))
        return false;
      for (int d = 0; d < impl->shape.size(); ++d)
        if (impl->strides[d] != tk->strides[d] && impl->shape[d] != 1) return false;
    } else {
      const bool equal = std::visit(
          [&](const auto& v) -> bool {
            using V = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<V, Tensor>)
              return false;
            else {
              const V* kv = std::get_if<V>(&k);
              return kv && same(*kv, v);
            }
          },
          call[i]);
      if (!equal) return false;
    }
  }
  return true;
}

int Signature::distance(const Signature& o) const {
  int d = (grad_mode != o.grad_mode) + (training != o.training) + (tf32 != o.tf32) +
          (threads != o.threads);
  const size_t n = std::max(args.size(), o.args.size());
  for (size_t i = 0; i < n; ++i) {
    if (i >= args.size() || i >= o.args.size() || args[i].index() != o.args[i].index()) {
      d += 10;
      continue;
    }
    const auto* a = std::get_if<TensorKey>(&args[i]);
    const auto* b = std::get_if<TensorKey>(&o.args[i]);
    if (a && b) {
      d += (a->dtype != b->dtype) + !(a->device == b->device) +
           (a->requires_grad != b->requires_grad) + !(a->strides == b->strides);
      if (a->shape.size() != b->shape.size())
        d += 5;
      else
        for (int j = 0; j < a->shape.size(); ++j) d += a->shape[j] != b->shape[j];
    } else {
      d += !same_key(args[i], o.args[i]);
    }
  }
  return d;
}

std::vector<RetraceCause> Signature::changes(const Signature& before,
                                             const std::vector<std::string>& names) const {
  using K = RetraceCause::Kind;
  std::vector<RetraceCause> out;
  auto name_of = [&](size_t i) { return i < names.size() ? names[i] : std::string(); };
  auto add = [&](K kind, size_t i, int axis, std::string old_value, std::string new_value) {
    out.push_back({kind,
                   static_cast<int>(i),
                   name_of(i),
                   axis,
                   std::move(old_value),
                   std::move(new_value),
                   {}});
  };
  if (args.size() != before.args.size())
    out.push_back({K::ArgCount,
                   -1,
                   {},
                   -1,
                   std::to_string(before.args.size()),
                   std::to_string(args.size()),
                   {}});
  for (size_t i = 0; i < std::min(args.size(), before.args.size()); ++i) {
    const ArgKey &now = args[i], &old = before.args[i];
    if (same_key(now, old)) continue;
    const auto* a = std::get_if<TensorKey>(&now);
    const auto* b = std::get_if<TensorKey>(&old);
    if (!a || !b) {
      add(K::StaticArg, i, -1, key_str(old), key_str(now));
      continue;
    }
    if (!(a->shape == b->shape)) {
      const std::string shapes = "shape " + b->shape.str() + " -> " + a->shape.str();
      if (a->shape.size() != b->shape.size()) add(K::Shape, i, -1, b->shape.str(), a->shape.str());
      for (int j = 0; a->shape.size() == b->shape.size() && j < a->shape.size(); ++j)
        if (a->shape[j] != b->shape[j])
          add(K::Shape, i, j, std::to_string(b->shape[j]), std::to_string(a->shape[j]));
      for (size_t c = out.size();
           c > 0 && out[c - 1].kind == K::Shape && out[c - 1].arg == static_cast<int>(i); --c)
        out[c - 1].note = shapes;
    }
    if (a->shape == b->shape && !(a->strides == b->strides))
      add(K::Strides, i, -1, b->strides.str(), a->strides.str());
    if (a->dtype != b->dtype)
      add(K::DType, i, -1, std::string(name(b->dtype)), std::string(name(a->dtype)));
    if (!(a->device == b->device)) add(K::Device, i, -1, b->device.str(), a->device.str());
    if (a->requires_grad != b->requires_grad)
      add(K::RequiresGrad, i, -1, b->requires_grad ? "true" : "false",
          a->requires_grad ? "true" : "false");
  }
  auto mode = [&](K kind, bool old, bool now) {
    if (old != now) out.push_back({kind, -1, {}, -1, old ? "on" : "off", now ? "on" : "off", {}});
  };
  mode(K::GradMode, before.grad_mode, grad_mode);
  mode(K::Training, before.training, training);
  mode(K::TF32, before.tf32, tf32);
  if (threads != before.threads)
    out.push_back(
        {K::Threads, -1, {}, -1, std::to_string(before.threads), std::to_string(threads), {}});
  return out;
}

std::string Signature::diff(const Signature& before, const std::vector<std::string>& names) const {
  const std::vector<RetraceCause> causes = changes(before, names);
  std::string s;
  for (size_t i = 0; i < causes.size(); ++i) {
    const RetraceCause& c = causes[i];
    const bool same_shape = i > 0 && c.kind == RetraceCause::Kind::Shape && c.axis >= 0 &&
                            causes[i - 1].kind == c.kind && causes[i - 1].arg == c.arg;
    if (same_shape)
      s += detail::cat(", axis ", c.axis, ": ", c.old_value, " -> ", c.new_value);
    else
      s += (i ? "; " : "") + c.str();
  }
  return s.empty() ? "identical signature" : s;
}

std::string_view kind_name(RetraceCause::Kind k) {
  static constexpr std::string_view kNames[] = {"first_call",
                                                "cleared",
                                                "shape",
                                                "strides",
                                                "dtype",
                                                "device",
                                                "requires_grad",
                                                "static_arg",
                                                "arg_count",
                                                "grad_mode",
                                                "training",
                                                "tf32",
                                                "replaced_parameter",
                                                "captured_gone",
                                                "captured_requires_grad",
                                                "grad_state",
                                                "eviction",
                                                "module_mode",
                                                "module_changed",
                                                "threads"};
  return kNames[static_cast<int>(k)];
}

std::string RetraceCause::str() const {
  using K = Kind;
  const std::string label = arg < 0            ? ""
                            : arg_name.empty() ? detail::cat("arg ", arg)
                                               : detail::cat("arg ", arg, " (", arg_name, ")");
  switch (kind) {
    case K::FirstCall:
      return "first call";
    case K::Cleared:
      return "no cached graph (cleared)";
    case K::Shape:
      return axis < 0 ? label + ": shape " + old_value + " -> " + new_value
                      : detail::cat(label, ": ", note, ", axis ", axis, ": ", old_value, " -> ",
                                    new_value);
    case K::Strides:
      return label + ": strides " + old_value + " -> " + new_value;
    case K::DType:
      return label + ": dtype " + old_value + " -> " + new_value;
    case K::Device:
      return label + ": device " + old_value + " -> " + new_value;
    case K::RequiresGrad:
      return label + ": requires_grad " + old_value + " -> " + new_value;
    case K::StaticArg:
      return label + ": " + old_value + " -> " + new_value;
    case K::ArgCount:
      return "number of arguments " + old_value + " -> " + new_value;
    case K::GradMode:
      return "grad mode " + old_value + " -> " + new_value;
    case K::Training:
      return "training " + old_value + " -> " + new_value;
    case K::TF32:
      return "tf32 " + old_value + " -> " + new_value;
    case K::ReplacedParameter:
      return "storage of captured tensor '" + arg_name + "' was replaced (set_data or Module::to)";
    case K::CapturedGone:
      return "captured tensor '" + arg_name + "' no longer exists";
    case K::CapturedRequiresGrad:
      return "captured tensor '" + arg_name + "' " +
             (new_value == "true" ? "now requires" : "no longer requires") + " grad";
    case K::GradState:
      return arg_name.empty() ? note : "the gradient of " + arg_name + " " + note;
    case K::Eviction:
      return "signature evicted earlier (" + note + ")";
    case K::ModuleMode:
      return "'" + arg_name + "' is in " + new_value + " mode now (" + old_value + " when traced)";
    case K::ModuleChanged:
      return "a child module or parameter of '" + arg_name + "' was set or removed";
    case K::Threads:
      return "cpu threads " + old_value + " -> " + new_value;
  }
  return {};
}

std::string Signature::str(const std::vector<std::string>& names) const {
  std::string s = "(";
  for (size_t i = 0; i < args.size(); ++i) {
    if (i) s += ", ";
    if (i < names.size() && !names[i].empty()) s += names[i] + ": ";
    s += key_str(args[i]);
  }
  s += ")";
  s += grad_mode ? " grad" : " no_grad";
  s += training ? " training" : " inference";
  if (tf32) s += " tf32";
  s += " threads=" + std::to_string(threads);
  return s;
}

}  // namespace encore::graph
