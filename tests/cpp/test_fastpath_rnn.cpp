// The recurrent float32 paths — oneDNN's fused onednn_lstm / onednn_gru and their backward ops,
// and the composed lstm_sequence / gru_sequence (oneDNN matmuls per step, threaded gate passes)
// with any activation, either direction — against float64 cells composed here from matmul and
// elementwise ops (each gradchecked in float64 by the op table), on random configurations.
// A recurrence has no per-element absolute-value problem, so the bound is normwise: each
// output's float32 error within 8 u T (C + 4U + B + 4) times its largest reference entry (T
// steps, each a sum over C inputs and U states, a gradient's over B rows too), weights scaled to
// keep the recurrence contractive. Gradients through relu or hard_sigmoid are compared only
// where no pre-activation lies within 1e-4 of a kink (float32 may land on its other side).
#include "fastpath.h"
#include "helpers.h"
#include "ops/dispatch.h"
#include "ops/nn.h"

namespace encore {
namespace {

using namespace fastpath;

enum class Kind { OnednnLstm, OnednnGru, LstmSequence, GruSequence };

struct RnnCase {
  Kind kind;
  int64_t batch, steps, channels, units;
  Activation act = Activation::Tanh, ract = Activation::Sigmoid;
  bool reverse = false;
  bool lstm() const { return kind == Kind::OnednnLstm || kind == Kind::LstmSequence; }
  bool fused() const { return kind == Kind::OnednnLstm || kind == Kind::OnednnGru; }
  int64_t gates() const { return lstm() ? 4 : 3; }
  std::string str() const {
    static const char* kNames[] = {"onednn_lstm", "onednn_gru", "lstm_sequence", "gru_sequence"};
    std::ostringstream s;
    s << kNames[static_cast<int>(kind)] << " batch " << batch << ", steps " << steps
      << ", channels " << channels << ", units " << units << ", activation " << name(act)
      << ", recurrent " << name(ract) << (reverse ? ", reverse" : "");
    return s.str();
  }
};

// The inputs in Keras' layouts. Fused: x (B, T, C), h0, c0 (B, U), W (C, G U), R (U, G U),
// b (G U) or the GRU's (2, G U). Composed: xw (B, T, G U), R (U, G U), the GRU's recurrent bias.
struct RnnData {
  std::vector<std::vector<double>> values;
  std::vector<Shape> shapes;
};

RnnData random_data(const RnnCase& c, Rng& rng) {
  const int64_t B = c.batch, T = c.steps, C = c.channels, U = c.units, G = c.gates() * c.units;
  RnnData d;
  const auto add = [&](Shape s, double scale) {
    std::vector<double> v = rng.values(s.numel());
    for (double& x : v) x *= scale;  // a power of two: still exact in float32
    d.values.push_back(std::move(v));
    d.shapes.push_back(std::move(s));
  };
  if (c.fused()) {
    add({B, T, C}, 1);
    add({B, U}, 1);
    if (c.lstm()) add({B, U}, 1);
    add({C, G}, 0.5);
    add({U, G}, 0.125);
    add(c.lstm() ? Shape{G} : Shape{2, G}, 0.5);
  } else {
    add({B, T, G}, 1);
    add({U, G}, 0.125);
    if (!c.lstm()) add({G}, 0.5);
  }
  return d;
}

// Keras' cells step by step, from ops that are not the paths under test: (y, hT[, cT]). `kink`
// gets the smallest distance of a pre-activation of relu or hard_sigmoid from its kink.
std::vector<Tensor> composed(const RnnCase& c, const std::vector<Tensor>& in, double& kink) {
  const int64_t U = c.units;
  const auto act = [&](const Tensor& z, Activation a) {
    if (a == Activation::Relu || a == Activation::HardSigmoid)
      for (const double v : z.detach().to_vector<double>())
        kink = std::min(kink, a == Activation::Relu
                                  ? std::fabs(v)
                                  : std::min(std::fabs(v - 2.5), std::fabs(v + 2.5)));
    return activation(z, a);
  };
  const auto gate = [&](const Tensor& z, int64_t i) { return z.slice(1, i * U, (i + 1) * U); };
  const Tensor& x = in[0];
  Tensor h, cell;
  std::function<Tensor(int64_t)> input;  // the step's input projection (B, G U)
  Tensor r, rb;
  if (c.fused()) {
    h = in[1];
    if (c.lstm()) cell = in[2];
    const Tensor &w = in[c.lstm() ? 3 : 2], &b = in[c.lstm() ? 5 : 4];
    r = in[c.lstm() ? 4 : 3];
    const Tensor bx = c.lstm() ? b : b.slice(0, 0, 1).squeeze(0);
    if (!c.lstm()) rb = b.slice(0, 1, 2).squeeze(0);
    input = [&, w, bx](int64_t t) { return matmul(x.slice(1, t, t + 1).squeeze(1), w) + bx; };
  } else {
    h = zeros({c.batch, U}, DType::Float64);
    cell = h;
    r = in[1];
    if (!c.lstm()) rb = in[2];
    input = [&](int64_t t) { return x.slice(1, t, t + 1).squeeze(1); };
  }
  std::vector<Tensor> ys(static_cast<size_t>(c.steps));
  for (int64_t s = 0; s < c.steps; ++s) {
    const int64_t t = c.reverse ? c.steps - 1 - s : s;
    const Tensor xz = input(t);
    if (c.lstm()) {
      const Tensor z = xz + matmul(h, r);
      cell = act(gate(z, 1), c.ract) * cell + act(gate(z, 0), c.ract) * act(gate(z, 2), c.act);
      h = act(gate(z, 3), c.ract) * act(cell, c.act);
    } else {
      const Tensor hz = matmul(h, r) + rb;
      const Tensor z = act(gate(xz, 0) + gate(hz, 0), c.ract),
                   rr = act(gate(xz, 1) + gate(hz, 1), c.ract);
      h = z * h + (1.0 - z) * act(gate(xz, 2) + rr * gate(hz, 2), c.act);
    }
    ys[static_cast<size_t>(t)] = h;
  }
  std::vector<Tensor> out{stack(ys, 1)};
  if (c.fused()) out.push_back(h);
  if (c.kind == Kind::OnednnLstm) out.push_back(cell);
  return out;
}

// The path under test: (y, hT[, cT]).
std::vector<Tensor> fast(const RnnCase& c, const std::vector<Tensor>& in) {
  switch (c.kind) {
    case Kind::OnednnLstm:
    case Kind::OnednnGru: {
      const OutList r =
          dispatch(op(c.lstm() ? "onednn_lstm" : "onednn_gru"), in, LstmAttrs{c.act, c.ract});
      return std::vector<Tensor>(r.t.begin(), r.t.begin() + r.n - 1);  // not the workspace
    }
    case Kind::LstmSequence:
      return {lstm_sequence(in[0], in[1], c.act, c.ract, c.reverse)};
    case Kind::GruSequence:
      return {gru_sequence(in[0], in[1], in[2], c.act, c.ract, c.reverse)};
  }
  return {};
}

// Runs `f` on the inputs in `dtype` and back-propagates sum(output * its gradient) over all
// outputs: the outputs, then the inputs' gradients.
template <class F>
std::vector<Tensor> with_gradients(const RnnData& d, const std::vector<std::vector<double>>& grads,
                                   bool f64_, F f) {
  std::vector<Tensor> in;
  for (size_t i = 0; i < d.values.size(); ++i)
    in.push_back(f64_ ? f64(d.values[i], d.shapes[i], true) : f32(d.values[i], d.shapes[i], true));
  std::vector<Tensor> out = f(in);
  Tensor loss;
  for (size_t i = 0; i < out.size(); ++i) {
    const Tensor g = f64_ ? f64(grads[i], out[i].shape()) : f32(grads[i], out[i].shape());
    const Tensor term = sum(out[i] * g);
    loss = loss.defined() ? loss + term : term;
  }
  loss.backward();
  for (Tensor& t : out) t = t.detach();
  for (const Tensor& t : in) out.push_back(t.grad());
  return out;
}

std::string check_rnn(const RnnCase& c, Rng& rng, bool& gradients_compared) {
  const RnnData d = random_data(c, rng);
  const int64_t outputs = c.fused() ? (c.lstm() ? 3 : 2) : 1;
  std::vector<std::vector<double>> grads;
  for (int64_t i = 0; i < outputs; ++i)
    grads.push_back(rng.values(i == 0 ? c.batch * c.steps * c.units : c.batch * c.units));
  double kink = INFINITY;
  const std::vector<Tensor> want = with_gradients(
      d, grads, true, [&](const std::vector<Tensor>& in) { return composed(c, in, kink); });
  const std::vector<Tensor> got =
      with_gradients(d, grads, false, [&](const std::vector<Tensor>& in) { return fast(c, in); });
  if (got.size() != want.size())
    return "the fast path gave " + std::to_string(got.size()) + " results, the reference " +
           std::to_string(want.size());
  const double n = static_cast<double>(c.steps * (c.channels + c.gates() * c.units + c.batch + 4));
  gradients_compared = kink >= 1e-4;
  const size_t compared = gradients_compared ? want.size() : static_cast<size_t>(outputs);
  for (size_t i = 0; i < compared; ++i) {
    Expected e(want[i].shape());
    e.value = want[i].to_vector<double>();
    double scale = 1;
    for (const double v : e.value) scale = std::max(scale, std::fabs(v));
    std::fill(e.bound.begin(), e.bound.end(), 8 * kU * n * scale);
    const std::string what = i < static_cast<size_t>(outputs)
                                 ? "output " + std::to_string(i)
                                 : "grad of input " + std::to_string(i - outputs);
    if (std::string v = violation(what.c_str(), got[i], e); !v.empty()) return v;
  }
  return "";
}

TEST(FastPath, Recurrent) {
  const Configs run("Recurrent", 0.12);
  Failures failures{run};
  int64_t forward_only = 0;
  const std::vector<Activation> any = {Activation::Tanh, Activation::Sigmoid, Activation::Relu,
                                       Activation::HardSigmoid, Activation::Linear};
  for (int64_t i = run.first; i < run.first + run.count; ++i) {
    Rng rng(run.seed, run.test, i);
    RnnCase c{static_cast<Kind>(i % 4), rng.chance(0.3) ? 1 : rng.integer(2, 5),
              rng.chance(0.2) ? 1 : rng.integer(2, 8), rng.integer(1, 12), rng.integer(1, 10)};
    if (!c.fused()) {  // the fused ops are Keras' tanh / sigmoid, forward only
      c.act = rng.pick(any);
      c.ract = rng.pick(any);
      c.reverse = rng.chance(0.5);
    }
    bool gradients = true;
    if (failures.add(i, c.str(), check_rnn(c, rng, gradients))) break;
    forward_only += !gradients;
  }
  std::cout << "[fastpath] recurrent: " << run.count
            << " configurations, gradients compared in all but " << forward_only
            << " (a pre-activation at a kink)\n";
}

}  // namespace
}  // namespace encore
