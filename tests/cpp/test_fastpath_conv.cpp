// conv1d's float32 fast paths (oneDNN: forward, backward data, backward weights, and encore's
// tap-block GEMMs for the two gradients; every implementation the autotune policies pick, and
// with `exhaustive` every one offered but oneDNN's reference ones; channels-last and blocked
// layouts; conv1d_fused's bias and activation) against a float64 reference written here,
// independent of encore (its padding arithmetic included), on random configurations: strides,
// dilations, paddings ('valid', 'same', 'causal', explicit and asymmetric), lengths near the
// kernel's span, odd channel counts, wide layers with long kernels, batch 1 and 0, and the region
// where oneDNN's AVX-512 weight gradient is wrong (ops/cpu/onednn_conv.cpp, known_wrong). The
// bound: tests/cpp/fastpath.h.
#include <map>

#include "fastpath.h"
#include "helpers.h"
#include "ops/autotune.h"
#include "ops/conv.h"

namespace encore {
namespace {

using namespace fastpath;

struct ConvCase {
  int64_t n, length, channels, filters, kernel, stride, dilation;
  Padding padding;
  bool fused = false;  // conv1d_fused with a bias and `activation`
  Activation activation = Activation::Linear;
  autotune::Policy policy = autotune::Policy::Heuristic;
  Conv1dLayout layout = Conv1dLayout::Native;

  // Keras' padding, worked out here rather than by encore.
  std::pair<int64_t, int64_t> pads() const {
    const int64_t span = (kernel - 1) * dilation + 1;
    switch (padding.kind) {
      case Padding::Same: {
        const int64_t out = (length + stride - 1) / stride;
        const int64_t total = std::max<int64_t>((out - 1) * stride + span - length, 0);
        return {total / 2, total - total / 2};
      }
      case Padding::Causal:
        return {span - 1, 0};
      case Padding::Explicit:
        return {padding.left, padding.right};
      default:
        return {0, 0};
    }
  }
  int64_t out_length() const {
    const auto [l, r] = pads();
    const int64_t padded = length + l + r, span = (kernel - 1) * dilation + 1;
    return padded < span ? 0 : (padded - span) / stride + 1;
  }
  std::string str() const {
    static const char* kPads[] = {"valid", "same", "causal", "explicit"};
    std::ostringstream s;
    const auto [l, r] = pads();
    s << (fused ? "conv1d_fused" : "conv1d") << " x (" << n << ", " << length << ", " << channels
      << "), w (" << kernel << ", " << channels << ", " << filters << "), stride " << stride
      << ", dilation " << dilation << ", padding " << kPads[padding.kind] << " (" << l << ", " << r
      << ")";
    if (fused) s << ", activation " << name(activation);
    s << ", policy " << autotune::name(policy)
      << (layout == Conv1dLayout::Blocked ? ", blocked" : "");
    return s.str();
  }
};

// The outputs of one call and of its backward pass.
struct ConvResult {
  Tensor y, gx, gw, gb;
};

// x (N, L, C), w (K, C, F), b (F), the gradient g of y: float32 values as doubles.
struct ConvData {
  std::vector<double> x, w, b, g;
};

ConvResult run_encore(const ConvCase& c, const ConvData& d) {
  const Tensor x = f32(d.x, {c.n, c.length, c.channels}, true),
               w = f32(d.w, {c.kernel, c.channels, c.filters}, true),
               b = f32(d.b, {c.filters}, true);
  const Tensor y = c.fused ? conv1d_fused(x, w, b, c.stride, c.padding, c.dilation, c.activation)
                           : conv1d(x, w, c.stride, c.padding, c.dilation);
  y.backward(f32(d.g, y.shape()));
  return {y.detach(), x.grad(), w.grad(), c.fused ? b.grad() : Tensor()};
}

// The reference: the forward from the data; the backward from the float32 output `y_got`, as
// encore's takes the activation's derivative from the output it computed.
struct ConvReference {
  Expected y, gx, gw, gb;
};

ConvReference reference(const ConvCase& c, const ConvData& d, const std::vector<double>& y_got) {
  const int64_t N = c.n, L = c.length, C = c.channels, F = c.filters, K = c.kernel,
                T = c.out_length();
  const int64_t pad_l = c.pads().first;
  ConvReference r{Expected({N, T, F}), Expected({N, L, C}), Expected({K, C, F}), Expected({F})};
  std::vector<double> mag_y(r.y.value.size()), mag_gx(r.gx.value.size()), mag_gw(r.gw.value.size()),
      mag_gb(r.gb.value.size()), gy(r.y.value.size()), gy_err(gy.size()), err_gx(mag_gx.size()),
      err_gw(mag_gw.size()), err_gb(mag_gb.size());
  const Activation act = c.fused ? c.activation : Activation::Linear;
  for (size_t i = 0; i < gy.size(); ++i) {
    gy[i] = activation_grad(act, d.g[i], y_got[i]);
    gy_err[i] = activation_grad_error(act, d.g[i], y_got[i]);
  }
  for (int64_t n = 0; n < N; ++n)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t f = 0; f < F; ++f) {
        const size_t o = static_cast<size_t>((n * T + t) * F + f);
        double sum = c.fused ? d.b[f] : 0, mag = c.fused ? std::fabs(d.b[f]) : 0;
        for (int64_t k = 0; k < K; ++k) {
          const int64_t i = t * c.stride + k * c.dilation - pad_l;
          if (i < 0 || i >= L) continue;
          for (int64_t ch = 0; ch < C; ++ch) {
            const size_t xi = static_cast<size_t>((n * L + i) * C + ch),
                         wi = static_cast<size_t>((k * C + ch) * F + f);
            sum += d.x[xi] * d.w[wi];
            mag += std::fabs(d.x[xi] * d.w[wi]);
            r.gx.value[xi] += gy[o] * d.w[wi];
            mag_gx[xi] += std::fabs(gy[o] * d.w[wi]);
            err_gx[xi] += gy_err[o] * std::fabs(d.w[wi]);
            r.gw.value[wi] += d.x[xi] * gy[o];
            mag_gw[wi] += std::fabs(d.x[xi] * gy[o]);
            err_gw[wi] += std::fabs(d.x[xi]) * gy_err[o];
          }
        }
        r.gb.value[f] += gy[o];
        mag_gb[f] += std::fabs(gy[o]);
        err_gb[f] += gy_err[o];
        r.y.value[o] = c.fused ? activate(c.activation, sum) : sum;
        mag_y[o] = mag;
      }
  bound_sums(r.y, mag_y, K * C + 1);
  if (c.fused)
    for (size_t o = 0; o < r.y.value.size(); ++o)
      r.y.bound[o] = activation_bound(c.activation, r.y.bound[o], r.y.value[o]);
  bound_sums(r.gx, mag_gx, K * F, err_gx);
  bound_sums(r.gw, mag_gw, N * T, err_gw);
  bound_sums(r.gb, mag_gb, N * T, err_gb);
  return r;
}

std::string compare(const ConvCase& c, const ConvResult& got, const ConvReference& want) {
  std::string out = violation("y", got.y, want.y);
  if (out.empty()) out = violation("grad x", got.gx, want.gx);
  if (out.empty()) out = violation("grad w", got.gw, want.gw);
  if (out.empty() && c.fused) out = violation("grad b", got.gb, want.gb);
  return out;
}

// Sets the autotune policy and conv1d's layout for a scope.
struct Settings {
  const autotune::Policy policy = autotune::policy();
  const Conv1dLayout layout = conv1d_layout();
  Settings(autotune::Policy p, Conv1dLayout l) {
    autotune::set_policy(p);
    set_conv1d_layout(l);
  }
  ~Settings() {
    autotune::set_policy(policy);
    set_conv1d_layout(layout);
  }
};

ConvData random_data(const ConvCase& c, Rng& rng) {
  return {rng.values(c.n * c.length * c.channels), rng.values(c.kernel * c.channels * c.filters),
          rng.values(c.filters), rng.values(c.n * c.out_length() * c.filters)};
}

// Runs `c` and compares it with the reference: "" when it agrees, else what differs and the
// implementations that ran.
std::string check(const ConvCase& c, const ConvData& d) {
  const ConvResult got = run_encore(c, d);
  std::string what = compare(c, got, reference(c, d, got.y.to_vector<double>()));
  if (what.empty()) return what;
  what += "; ran";
  for (const ConvPrimitiveInfo& p : conv1d_primitives())
    what += " " + p.key.substr(0, p.key.find(' ')) + " " + p.impl + ",";
  return what;
}

// Counts the implementations the configuration ran, per direction.
void note(std::map<std::string, int>& seen) {
  for (const ConvPrimitiveInfo& p : conv1d_primitives())
    ++seen[p.key.substr(0, p.key.find(' ')) + " " + p.impl];
}

// Every implementation of every kind the exhaustive search timed for `c` (each stored as the
// choice in turn, as a loaded file would), checked: "" when all agree.
std::string check_every_implementation(const ConvCase& c, const ConvData& d,
                                       std::map<std::string, int>& seen) {
  const std::vector<autotune::Entry> searched = autotune::entries();
  for (const autotune::Entry& e : searched)
    for (const auto& [impl, ms] : e.timings) {
      if (impl == e.algorithm) continue;  // checked already
      autotune::Entry forced = e;
      forced.algorithm = impl;
      forced.source = "heuristic";
      forced.timings = {};
      autotune::clear();
      clear_conv1d_primitives();
      autotune::detail::store(forced);
      const Settings heuristic(autotune::Policy::Heuristic, c.layout);
      const std::string out = check(c, d);
      if (!out.empty()) return e.op + " stored as " + impl + ": " + out;
      note(seen);
    }
  return "";
}

// A random configuration: mostly small and varied, one in six from the region where oneDNN's
// AVX-512 weight gradient goes wrong (stride > 1, over 28 output steps, left padding > 14), one
// in twelve a strided 1x1 of few channels (its 1x1 weight gradient's bug).
ConvCase random_case(Rng& rng, int64_t i) {
  ConvCase c{};
  for (;;) {
    const bool hard = rng.chance(1.0 / 6);
    c.kernel = rng.integer(1, hard ? 8 : 6);
    c.dilation = hard              ? rng.integer(3, 8)
                 : rng.chance(0.6) ? 1
                                   : rng.integer(2, rng.chance(0.2) ? 12 : 4);
    c.stride = hard ? rng.integer(2, 4) : rng.chance(0.4) ? 1 : rng.integer(2, 5);
    const int64_t span = (c.kernel - 1) * c.dilation + 1;
    c.length = hard              ? rng.integer(60, 150)
               : rng.chance(0.3) ? std::max<int64_t>(1, span + rng.integer(-3, 3))
                                 : rng.integer(1, 40);
    c.channels =
        rng.chance(0.5) ? rng.pick<int64_t>({1, 3, 5, 7, 15, 17, 31, 33}) : rng.integer(1, 40);
    c.filters = rng.chance(0.5) ? rng.pick<int64_t>({1, 2, 3, 9, 16, 17, 32}) : rng.integer(1, 33);
    c.n = rng.chance(0.05) ? 0 : rng.chance(0.4) ? 1 : rng.integer(2, 4);
    if (!hard && rng.chance(0.1)) {  // strided 1x1 of few channels (oneDNN's 1x1 workspace bug)
      c.kernel = 1;
      c.stride = rng.integer(2, 4);
      c.channels = rng.integer(1, 17);
      c.length = rng.integer(20, 90);
    } else if (!hard && rng.chance(0.08)) {
      // A wide layer with a long kernel, a whole number of strides: where encore's tap-block
      // gradients run under the heuristic too (64 channels or more: tap_forward).
      c.stride = rng.integer(1, 4);
      c.kernel = c.stride * rng.integer(2, 8);
      c.dilation = 1;
      c.channels = rng.integer(60, 96);
      c.filters = rng.integer(8, 40);
      c.length = rng.integer(c.kernel, c.kernel + 60);
      c.n = rng.integer(1, 3);
    }
    switch (rng.integer(0, 4)) {
      case 0:
        c.padding = Padding::valid();
        break;
      case 1:
        c.padding = Padding::same();
        break;
      case 2:
        c.padding = Padding::causal();
        break;
      default: {
        const int64_t most = hard ? 28 : span;
        const int64_t left = rng.integer(hard ? 15 : 0, most);
        c.padding = Padding::explicit_(left, rng.chance(0.5) ? left : rng.integer(0, most));
      }
    }
    if (c.out_length() >= 1) break;
  }
  c.fused = rng.chance(0.3);
  c.activation = c.fused ? rng.pick(fusable_activations()) : Activation::Linear;
  // Policies in turn, so that each gets its share whatever the count.
  c.policy = std::vector{autotune::Policy::Heuristic, autotune::Policy::Exhaustive,
                         autotune::Policy::Off}[i % 3];
  c.layout = rng.chance(0.25) ? Conv1dLayout::Blocked : Conv1dLayout::Native;
  return c;
}

TEST(FastPath, Conv1d) {
  const Configs run("Conv1d", 0.5);
  Failures failures{run};
  std::map<std::string, int> seen;  // "direction implementation" -> configurations
  for (int64_t i = run.first; i < run.first + run.count; ++i) {
    Rng rng(run.seed, run.test, i);
    const ConvCase c = random_case(rng, i);
    const ConvData d = random_data(c, rng);
    autotune::clear();
    clear_conv1d_primitives();
    std::string what;
    {
      const Settings settings(c.policy, c.layout);
      what = check(c, d);
      note(seen);
    }
    if (what.empty() && c.policy == autotune::Policy::Exhaustive)
      what = check_every_implementation(c, d, seen);
    if (failures.add(i, c.str(), what)) break;
  }
  autotune::clear();
  clear_conv1d_primitives();
  std::cout << "[fastpath] conv1d: " << run.count << " configurations (seed " << run.seed
            << "); implementations run:\n";
  for (const auto& [impl, n] : seen) std::cout << "  " << impl << ": " << n << "\n";
  // encore's own gradients (ops/cpu/conv_taps.h) are among those checked, not only oneDNN's.
  if (run.count >= 100) {
    for (const char* impl : {"backward_data encore:tap_gemm", "backward_data encore:tap_forward",
                             "backward_filter encore:tap_gemm"}) {
      EXPECT_TRUE(std::any_of(seen.begin(), seen.end(), [&](const auto& s) {
        return s.first.starts_with(impl);
      })) << impl;
    }
  }
}

// The problems oneDNN's weight gradient got wrong (ops/cpu/onednn_conv.cpp, known_wrong), each
// with the implementation that did: issue #24's (126% off under the default policy on AVX-512
// machines), and strided 1x1 convolutions of few channels, which write past their scratchpad
// (found by the long random run).
struct Reported {
  ConvCase c;
  const char* impl;
};

std::vector<Reported> reported() {
  std::vector<Reported> r;
  for (const int64_t stride : {2, 3})
    r.push_back({{6, 70, 39, 2, 8, stride, 4, Padding::explicit_(23, 23)}, "jit:avx512_core"});
  for (const int64_t stride : {3, 4})
    for (const int64_t kernel : {5, 8})
      r.push_back({{2, 141, 8, 16, kernel, stride, 8, Padding::same()}, "jit:avx512_core"});
  r.push_back({{3, 66, 5, 1, 1, 3, 4, Padding::valid()}, "jit_1x1:avx512_core"});
  r.push_back({{1, 36, 7, 1, 1, 2, 3, Padding::causal()}, "jit_1x1:avx512_core"});
  r.push_back({{3, 78, 2, 37, 1, 2, 1, Padding::valid()}, "jit_1x1:avx2"});
  return r;
}

// Fails when the weight gradient ran `impl`.
void expect_not_run(const char* impl) {
  for (const ConvPrimitiveInfo& p : conv1d_primitives())
    if (p.key.starts_with("backward_filter")) {
      EXPECT_FALSE(p.impl.starts_with(impl)) << p.key;
    }
}

// Under every policy and layout.
TEST(FastPath, ReportedConv1dWeightGradients) {
  Rng rng(1, "ReportedConv1dWeightGradients", 0);
  for (auto [c, impl] : reported()) {
    const ConvData d = random_data(c, rng);
    for (const autotune::Policy policy :
         {autotune::Policy::Heuristic, autotune::Policy::Exhaustive, autotune::Policy::Off})
      for (const Conv1dLayout layout : {Conv1dLayout::Native, Conv1dLayout::Blocked}) {
        c.policy = policy;
        c.layout = layout;
        autotune::clear();
        clear_conv1d_primitives();
        const Settings settings(policy, layout);
        EXPECT_EQ(check(c, d), "") << c.str();
        expect_not_run(impl);
      }
  }
  autotune::clear();
  clear_conv1d_primitives();
}

// With the implementation stored as the choice, as a file saved before the guard would have it.
TEST(FastPath, KnownWrongImplementationIsNotTakenFromTheStore) {
  Rng rng(1, "KnownWrongImplementationIsNotTakenFromTheStore", 0);
  for (const auto& [c, impl] : reported()) {
    const ConvData d = random_data(c, rng);
    autotune::clear();
    clear_conv1d_primitives();
    {
      // What a search of this shape stores (its key included) under the exhaustive policy.
      const Settings exhaustive(autotune::Policy::Exhaustive, Conv1dLayout::Native);
      ASSERT_EQ(check(c, d), "") << c.str();
    }
    for (autotune::Entry e : autotune::entries()) {
      if (e.op != "conv1d_backward_filter") continue;
      e.algorithm = impl;
      e.source = "heuristic";
      autotune::clear();
      clear_conv1d_primitives();
      autotune::detail::store(e);
      const Settings heuristic(autotune::Policy::Heuristic, Conv1dLayout::Native);
      EXPECT_EQ(check(c, d), "") << c.str();
      expect_not_run(impl);
    }
  }
  autotune::clear();
  clear_conv1d_primitives();
}

// The comparison itself bites: a weight gradient off by one float32 step in one element passes,
// off by a thousandth of its terms fails.
TEST(FastPath, BoundCatchesAWrongGradient) {
  const ConvCase c{2, 9, 3, 4, 3, 2, 2, Padding::same()};
  Rng rng(1, "BoundCatchesAWrongGradient", 0);
  const ConvData d = random_data(c, rng);
  ConvResult got = run_encore(c, d);
  const ConvReference want = reference(c, d, got.y.to_vector<double>());
  ASSERT_EQ(compare(c, got, want), "");
  std::vector<double> gw = got.gw.to_vector<double>();
  gw[5] = std::nextafter(static_cast<float>(want.gw.value[5]), 10.0f);
  EXPECT_EQ(violation("grad w", f32(gw, got.gw.shape()), want.gw), "");
  gw[5] = want.gw.value[5] + 1e-3 * want.gw.bound[5] / (2 * kU * (c.n * c.out_length() + 4));
  EXPECT_NE(violation("grad w", f32(gw, got.gw.shape()), want.gw), "");
}

}  // namespace
}  // namespace encore
