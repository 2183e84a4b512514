#include "graph/lengths.h"

#include <algorithm>
#include <unordered_map>

#include "ops/ops.h"

namespace encore::graph {

struct LengthScope::State {
  struct Entry {
    std::weak_ptr<TensorImpl> owner;  // the key's address may be reused once it dies
    Lengths lengths;
  };
  std::unordered_map<const TensorImpl*, Entry> known;
  std::vector<std::string> inexact;
  OnRegister on_register;
};

namespace {
thread_local LengthScope::State* g_state = nullptr;
}  // namespace

LengthScope::LengthScope(OnRegister on_register) : previous_(g_state), state_(new State) {
  state_->on_register = std::move(on_register);
  g_state = state_;
}
LengthScope::~LengthScope() {
  g_state = previous_;
  delete state_;
}

std::optional<Lengths> lengths_of(const Tensor& t) {
  if (!g_state || !t.defined()) return std::nullopt;
  const auto it = g_state->known.find(t.impl());
  if (it == g_state->known.end() || it->second.owner.lock().get() != t.impl()) return std::nullopt;
  return it->second.lengths;
}

void set_lengths(const Tensor& t, Lengths lengths, bool masked) {
  if (!g_state || !t.defined()) return;
  if (g_state->on_register) g_state->on_register(t, lengths, masked);
  g_state->known[t.impl()] = {t.impl_ptr(), std::move(lengths)};
}

void note_inexact(std::string why) {
  if (g_state &&
      std::find(g_state->inexact.begin(), g_state->inexact.end(), why) == g_state->inexact.end())
    g_state->inexact.push_back(std::move(why));
}

std::vector<std::string> inexact_notes() {
  return g_state ? g_state->inexact : std::vector<std::string>{};
}

std::optional<Lengths> same_lengths(const Lengths& in, const Tensor& x, const Tensor& y) {
  if (in.axis >= y.dim() || in.axis >= x.dim() || y.shape()[in.axis] != x.shape()[in.axis])
    return std::nullopt;
  return in;
}

Lengths window_lengths(const Lengths& in, int64_t size, int64_t stride, int64_t dilation,
                       int64_t left) {
  // Windows that lie inside the valid entries: (length + left - span) / stride + 1, none when
  // the valid entries are shorter than one window (the graph's value is then unused: such calls
  // are not served by the bucket).
  const int64_t shift = left - (size - 1) * dilation - 1;
  Lengths out = in;
  out.length = (in.length + shift) / stride + 1;
  out.of_call = [f = in.of_call, shift, stride](int64_t n) {
    const int64_t fits = f(n) + shift;
    return fits < 0 ? 0 : fits / stride + 1;
  };
  return out;
}

Tensor mask_padding(const Tensor& x, int axis, double value) {
  const std::optional<Lengths> l = lengths_of(x);
  if (!l || l->axis != axis) return x;
  Tensor y = mask_sequence(x, l->length, axis, value);
  set_lengths(y, *l, /*masked=*/true);
  return y;
}

std::pair<Tensor, Tensor> valid_moments(const Tensor& x, const std::vector<int64_t>& axes) {
  const std::optional<Lengths> l = lengths_of(x);
  if (!l || std::find(axes.begin(), axes.end(), l->axis) == axes.end()) return moments(x, axes);
  // Two passes, as moments(): the mean, then the squares around it, each over the valid
  // entries and divided by their count.
  double rest = 1;
  for (int64_t a : axes)
    if (a != l->axis) rest *= static_cast<double>(x.shape()[a]);
  const Tensor count = l->length.to(x.dtype()) * rest;
  const Tensor valid = mask_sequence(x, l->length, l->axis);
  const Tensor mean_kept = sum(valid, axes, true) / count;
  const Tensor d = mask_sequence(x - mean_kept, l->length, l->axis);
  return {sum(valid, axes) / count, sum(d * d, axes) / count};
}

Tensor valid_mean(const Tensor& v, const Tensor& like) {
  const std::optional<Lengths> l = lengths_of(like);
  if (!l || l->axis >= v.dim() || v.shape()[l->axis] != like.shape()[l->axis]) return mean(v);
  const int64_t rest = v.shape()[l->axis] ? v.numel() / v.shape()[l->axis] : 0;
  const Tensor count = (l->length.to(v.dtype()) * static_cast<double>(rest)).reshape({});
  return sum(mask_sequence(v, l->length, l->axis)) / count;
}

}  // namespace encore::graph
