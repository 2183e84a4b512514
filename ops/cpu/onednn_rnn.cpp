// oneDNN's LSTM primitive as the CPU fast path, as cuDNN is on the GPU: onednn_lstm runs a whole
// unidirectional LSTM sequence in one op, onednn_lstm_backward its gradients. The ops mirror
// cudnn_lstm (ops/cuda/cudnn_rnn.cpp): Keras' semantics, activation tanh and recurrent
// activation sigmoid (the primitive's only ones), inputs (x, h0, c0, W, R, b).
//
// Our tensors are oneDNN's user layouts as they lie: x and y (batch, steps, features) are
// `ntc`, the states `ldnc` with one layer and direction, W (in, 4U) and R (U, 4U) `ldigo` and b
// (4U) `ldgo`, since oneDNN's gate order (i, f, c~, o) is Keras'. The primitive picks its own
// weight layouts (format `any`); the weights are reordered into them on every call (into this
// thread's scratch) so W, R and b stay ordinary parameters. float32 only: there is no float64
// RNN primitive, so the op table checks these rows against the composed recurrence in float32
// (OpDef::backends, Example::reference) instead of against finite differences.
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "ops/cpu/onednn.h"
#include "ops/defs/common.h"
#include "ops/nn.h"
#include "ops/ops.h"

namespace encore {
namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

struct RnnKey {
  int64_t batch, steps, input, units;
  bool operator==(const RnnKey&) const = default;
};
struct RnnKeyHash {
  size_t operator()(const RnnKey& k) const {
    size_t h = 0;
    for (int64_t v : {k.batch, k.steps, k.input, k.units})
      h = h * 1000003u ^ static_cast<size_t>(v);
    return h;
  }
};

// The user-layout descriptors of one problem and the primitives on them. Immutable once built.
struct RnnSetup {
  RnnKey key;
  dnnl::memory::desc x, y, state, w, r, b;
  dnnl::lstm_forward::primitive_desc fwd;
  dnnl::lstm_backward::primitive_desc bwd;
  dnnl::lstm_forward forward;
  dnnl::lstm_backward backward;
};

std::shared_ptr<const RnnSetup> make_setup(const RnnKey& k) {
  dnnl::engine& e = cpu::onednn_engine();
  auto s = std::make_shared<RnnSetup>();
  s->key = k;
  const int64_t B = k.batch, T = k.steps, I = k.input, U = k.units;
  s->x = {{T, B, I}, dt::f32, tag::ntc};
  s->y = {{T, B, U}, dt::f32, tag::ntc};
  s->state = {{1, 1, B, U}, dt::f32, tag::ldnc};
  s->w = {{1, 1, I, 4, U}, dt::f32, tag::ldigo};
  s->r = {{1, 1, U, 4, U}, dt::f32, tag::ldigo};
  s->b = {{1, 1, 4, U}, dt::f32, tag::ldgo};
  const dnnl::memory::desc w_any({1, 1, I, 4, U}, dt::f32, tag::any),
      r_any({1, 1, U, 4, U}, dt::f32, tag::any);
  const auto dir = dnnl::rnn_direction::unidirectional_left2right;
  try {
    s->fwd = dnnl::lstm_forward::primitive_desc(
        dnnl::lstm_forward::desc(dnnl::prop_kind::forward_training, dir, s->x, s->state, s->state,
                                 w_any, r_any, s->b, s->y, s->state, s->state),
        e);
    s->bwd = dnnl::lstm_backward::primitive_desc(
        dnnl::lstm_backward::desc(dnnl::prop_kind::backward, dir, s->x, s->state, s->state, w_any,
                                  r_any, s->b, s->y, s->state, s->state, s->x, s->state, s->state,
                                  w_any, r_any, s->b, s->y, s->state, s->state),
        e, s->fwd);
    s->forward = dnnl::lstm_forward(s->fwd);
    s->backward = dnnl::lstm_backward(s->bwd);
  } catch (const dnnl::error& err) {
    throw BackendError(std::string("[onednn_lstm] oneDNN LSTM creation failed: ") + err.what());
  }
  return s;
}

// Shape inference needs the workspace size (an output) before any kernel state exists, hence a
// cache of its own, like cuDNN's. Bounded: past 64 shapes it starts over.
std::shared_ptr<const RnnSetup> setup_for(const RnnKey& k) {
  static std::mutex mutex;
  static std::unordered_map<RnnKey, std::shared_ptr<const RnnSetup>, RnnKeyHash> setups;
  std::lock_guard<std::mutex> lock(mutex);
  if (setups.size() >= 64 && !setups.count(k)) setups.clear();
  auto& s = setups[k];
  if (!s) s = make_setup(k);
  return s;
}

RnnKey key_of(const TensorRef& x, const TensorRef& h0) {
  return {x.shape[0], x.shape[1], x.shape[2], h0.shape[1]};
}

int64_t workspace_floats(const RnnSetup& s) {
  return static_cast<int64_t>((s.fwd.workspace_desc().get_size() + 3) / 4);
}

void check_inputs(const char* op, std::span<const Tensor> in, const Attrs& attrs) {
  const auto& a = attrs.as<LstmAttrs>();
  ENCORE_CHECK(a.activation == Activation::Tanh && a.recurrent_activation == Activation::Sigmoid,
               UnsupportedError, "[", op,
               "] oneDNN's LSTM computes activation=tanh, recurrent_activation=sigmoid; got ",
               a.str(), " (use the composed LSTM)");
  for (size_t i = 0; i < in.size(); ++i)
    ENCORE_CHECK(in[i].dtype() == DType::Float32 && in[i].device().is_cpu(), DTypeError, "[", op,
                 "] needs float32 CPU tensors; input ", i, " is ", describe(in[i]));
  const Tensor& x = in[0];
  ENCORE_CHECK(x.dim() == 3 && x.shape()[0] >= 1 && x.shape()[1] >= 1 && x.shape()[2] >= 1,
               ShapeError, "[", op, "] input must be (batch, steps >= 1, features), got ",
               x.shape().str());
  const int64_t batch = x.shape()[0], input = x.shape()[2];
  const int64_t units = in[1].dim() == 2 ? in[1].shape()[1] : 0;
  const Shape state{batch, units};
  ENCORE_CHECK(units >= 1 && in[1].shape() == state && in[2].shape() == state &&
                   in[3].shape() == Shape({input, 4 * units}) &&
                   in[4].shape() == Shape({units, 4 * units}) &&
                   in[5].shape() == Shape({4 * units}),
               ShapeError, "[", op, "] for input ", x.shape().str(),
               " expects h0 and c0 (batch, units), kernel (", input,
               ", 4 * units), recurrent kernel (units, 4 * units) and bias (4 * units); got ",
               in[1].shape().str(), ", ", in[3].shape().str(), ", ", in[4].shape().str(), ", ",
               in[5].shape().str());
}

// onednn_lstm(x, h0, c0, W, R, b) -> (y (B, T, U), hT, cT, workspace)
int infer_forward(const OpDef&, std::span<const Tensor> in, const Attrs& attrs, TensorMeta* out) {
  check_inputs("onednn_lstm", in, attrs);
  const Tensor& x = in[0];
  const int64_t units = in[1].shape()[1];
  const auto s = setup_for({x.shape()[0], x.shape()[1], x.shape()[2], units});
  out[0] = defs::meta({x.shape()[0], x.shape()[1], units}, DType::Float32, x.device());
  out[1] = out[2] = defs::meta_like(in[1]);
  out[3] = defs::meta({workspace_floats(*s)}, DType::Float32, x.device());
  return 4;
}

// The backward op's inputs: the forward's, then its outputs y, hT, cT, workspace and the
// gradients gy, ghT, gcT.
void bw_forward(const BackwardCtx& c, Tensor* g) {
  auto grad = [&](int i) { return c.grads[i].defined() ? c.grads[i] : zeros_like(c.outputs[i]); };
  std::vector<Tensor> in(c.inputs.begin(), c.inputs.end());
  for (int i = 0; i < 4; ++i) in.push_back(c.outputs[i]);
  for (int i = 0; i < 3; ++i) in.push_back(grad(i));
  const OutList r = dispatch(op("onednn_lstm_backward"), in, c.attrs);
  for (int i = 0; i < 6; ++i)
    if (c.need(i)) g[i] = r[i];
}

// onednn_lstm_backward(x, h0, c0, W, R, b, y, hT, cT, workspace, gy, ghT, gcT)
//   -> (gx, gh0, gc0, gW, gR, gb)
int infer_backward(const OpDef&, std::span<const Tensor> in, const Attrs& attrs, TensorMeta* out) {
  check_inputs("onednn_lstm_backward", in.subspan(0, 6), attrs);
  const Tensor& x = in[0];
  const Shape y{x.shape()[0], x.shape()[1], in[1].shape()[1]};
  const auto s = setup_for({x.shape()[0], x.shape()[1], x.shape()[2], in[1].shape()[1]});
  const bool ok = in[6].shape() == y && in[10].shape() == y &&
                  in[9].shape() == Shape({workspace_floats(*s)}) &&
                  in[7].shape() == in[1].shape() && in[8].shape() == in[1].shape() &&
                  in[11].shape() == in[1].shape() && in[12].shape() == in[1].shape();
  ENCORE_CHECK(ok, ShapeError,
               "[onednn_lstm_backward] outputs and gradients do not match the input ",
               x.shape().str());
  for (int i = 6; i < 13; ++i)
    ENCORE_CHECK(in[i].dtype() == DType::Float32 && in[i].device().is_cpu(), DTypeError,
                 "[onednn_lstm_backward] input ", i, " ", describe(in[i]),
                 " must be float32 on the CPU");
  for (int i = 0; i < 6; ++i) out[i] = defs::meta_like(in[i]);
  return 6;
}

// ---- kernels -----------------------------------------------------------------------------

std::shared_ptr<void> prepare(const KernelCtx& c) {
  return std::const_pointer_cast<RnnSetup>(setup_for(key_of(c.in[0], c.in[1])));
}

dnnl::memory user(const dnnl::memory::desc& d, const TensorRef& t) {
  return dnnl::memory(d, cpu::onednn_engine(), t.data);
}

// `from` in the layout `to` (this thread's scratch slot `slot` when that differs).
dnnl::memory in_layout(dnnl::memory from, const dnnl::memory::desc& to, int slot) {
  if (from.get_desc() == to) return from;
  dnnl::memory m(to, cpu::onednn_engine(), cpu::thread_scratch(slot, to.get_size()));
  dnnl::reorder(from, m).execute(cpu::onednn_stream(), from, m);
  return m;
}

void forward_kernel(const KernelCtx& c) {
  const auto& s = *static_cast<const RnnSetup*>(c.state);
  ENCORE_CHECK(s.key == key_of(c.in[0], c.in[1]), BackendError,
               "[onednn_lstm] called with a prepared state made for another shape");
  dnnl::stream& st = cpu::onednn_stream();
  const dnnl::memory w = in_layout(user(s.w, c.in[3]), s.fwd.weights_layer_desc(), 0);
  const dnnl::memory r = in_layout(user(s.r, c.in[4]), s.fwd.weights_iter_desc(), 1);
  s.forward.execute(st, {{DNNL_ARG_SRC_LAYER, user(s.x, c.in[0])},
                         {DNNL_ARG_SRC_ITER, user(s.state, c.in[1])},
                         {DNNL_ARG_SRC_ITER_C, user(s.state, c.in[2])},
                         {DNNL_ARG_WEIGHTS_LAYER, w},
                         {DNNL_ARG_WEIGHTS_ITER, r},
                         {DNNL_ARG_BIAS, in_layout(user(s.b, c.in[5]), s.fwd.bias_desc(), 2)},
                         {DNNL_ARG_DST_LAYER, user(s.y, c.out[0])},
                         {DNNL_ARG_DST_ITER, user(s.state, c.out[1])},
                         {DNNL_ARG_DST_ITER_C, user(s.state, c.out[2])},
                         {DNNL_ARG_WORKSPACE, dnnl::memory(s.fwd.workspace_desc(),
                                                           cpu::onednn_engine(), c.out[3].data)}});
  st.wait();
}

void backward_kernel(const KernelCtx& c) {
  const auto& s = *static_cast<const RnnSetup*>(c.state);
  ENCORE_CHECK(s.key == key_of(c.in[0], c.in[1]), BackendError,
               "[onednn_lstm_backward] called with a prepared state made for another shape");
  dnnl::engine& e = cpu::onednn_engine();
  dnnl::stream& st = cpu::onednn_stream();
  const dnnl::memory w = in_layout(user(s.w, c.in[3]), s.bwd.weights_layer_desc(), 0);
  const dnnl::memory r = in_layout(user(s.r, c.in[4]), s.bwd.weights_iter_desc(), 1);
  const dnnl::memory b = in_layout(user(s.b, c.in[5]), s.bwd.bias_desc(), 2);
  // The primitive adds the weights' gradients into its buffers: they start at zero.
  auto zeroed = [&](const dnnl::memory::desc& d, int slot) {
    std::byte* p = cpu::thread_scratch(slot, d.get_size());
    std::memset(p, 0, d.get_size());
    return dnnl::memory(d, e, p);
  };
  const dnnl::memory gw = zeroed(s.bwd.diff_weights_layer_desc(), 3),
                     gr = zeroed(s.bwd.diff_weights_iter_desc(), 4),
                     gb = zeroed(s.bwd.diff_bias_desc(), 5);
  s.backward.execute(st,
                     {{DNNL_ARG_SRC_LAYER, user(s.x, c.in[0])},
                      {DNNL_ARG_SRC_ITER, user(s.state, c.in[1])},
                      {DNNL_ARG_SRC_ITER_C, user(s.state, c.in[2])},
                      {DNNL_ARG_WEIGHTS_LAYER, w},
                      {DNNL_ARG_WEIGHTS_ITER, r},
                      {DNNL_ARG_BIAS, b},
                      {DNNL_ARG_DST_LAYER, user(s.y, c.in[6])},
                      {DNNL_ARG_DST_ITER, user(s.state, c.in[7])},
                      {DNNL_ARG_DST_ITER_C, user(s.state, c.in[8])},
                      {DNNL_ARG_WORKSPACE, dnnl::memory(s.bwd.workspace_desc(), e, c.in[9].data)},
                      {DNNL_ARG_DIFF_DST_LAYER, user(s.y, c.in[10])},
                      {DNNL_ARG_DIFF_DST_ITER, user(s.state, c.in[11])},
                      {DNNL_ARG_DIFF_DST_ITER_C, user(s.state, c.in[12])},
                      {DNNL_ARG_DIFF_SRC_LAYER, user(s.x, c.out[0])},
                      {DNNL_ARG_DIFF_SRC_ITER, user(s.state, c.out[1])},
                      {DNNL_ARG_DIFF_SRC_ITER_C, user(s.state, c.out[2])},
                      {DNNL_ARG_DIFF_WEIGHTS_LAYER, gw},
                      {DNNL_ARG_DIFF_WEIGHTS_ITER, gr},
                      {DNNL_ARG_DIFF_BIAS, gb}});
  for (auto [from, d, t] : {std::tuple{gw, s.w, c.out[3]}, std::tuple{gr, s.r, c.out[4]},
                            std::tuple{gb, s.b, c.out[5]}}) {
    dnnl::memory to = user(d, t);
    dnnl::reorder(from, to).execute(st, from, to);
  }
  st.wait();
}

// ---- the op table's examples ---------------------------------------------------------------

// The forward's outputs, and through autograd the gradients of the sum of their squares (every
// output's gradient takes part, each element's its own).
Outputs lstm_example(std::span<const Tensor> x, Outputs (*lstm)(std::span<const Tensor>)) {
  std::vector<Tensor> in;
  for (const Tensor& t : x) in.push_back(t.detach().clone().set_requires_grad(true));
  Outputs y = lstm(in);
  Tensor loss = zeros({}, x[0].dtype());
  for (const Tensor& t : y) loss = loss + sum(t * t);
  loss.backward();
  for (const Tensor& t : in) y.push_back(t.grad());
  for (Tensor& t : y) t = t.detach();
  return y;
}

Outputs fused(std::span<const Tensor> in) {
  const OutList r =
      dispatch(op("onednn_lstm"), in, LstmAttrs{Activation::Tanh, Activation::Sigmoid});
  return {r[0], r[1], r[2]};
}

// Keras' LSTM step by step from (h0, c0) with the composed cell: what onednn_lstm must equal.
Outputs composed(std::span<const Tensor> in) {
  const Tensor &x = in[0], &w = in[3], &r = in[4], &b = in[5];
  Tensor h = in[1], c = in[2];
  std::vector<Tensor> ys;
  for (int64_t t = 0; t < x.shape()[1]; ++t) {
    const Tensor z = matmul(x.slice(1, t, t + 1).squeeze(1), w) + matmul(h, r) + b;
    std::tie(h, c) = lstm_cell(z, c, Activation::Tanh, Activation::Sigmoid);
    ys.push_back(h);
  }
  return {stack(ys, 1), h, c};
}

Outputs forward_example(std::span<const Tensor> x) { return lstm_example(x, fused); }
Outputs forward_reference(std::span<const Tensor> x) { return lstm_example(x, composed); }

const std::vector<ExampleInput> kInputs = {{{2, 5, 3}}, {{2, 4}},  {{2, 4}},
                                           {{3, 16}},   {{4, 16}}, {{16}}};
constexpr uint8_t kCpuOnly = 1u << static_cast<int>(DeviceType::CPU);

OpDef& onednn_lstm_op = define_op({
    .name = "onednn_lstm",
    .min_inputs = 6,
    .max_inputs = 6,
    .save = Save::Inputs | Save::Outputs,
    .contiguous_inputs = true,
    .backends = kCpuOnly,
    .attrs = &attrs_of<LstmAttrs>,
    .infer = infer_forward,
    .backward = bw_forward,
    .cpu = {forward_kernel, prepare},
    .example = {.inputs = kInputs,
                .call = forward_example,
                .parity_tolerance = 1e-4,
                .reference = forward_reference},
});
OpDef& onednn_lstm_backward_op = define_op({
    .name = "onednn_lstm_backward",
    .min_inputs = 13,
    .max_inputs = 13,
    .contiguous_inputs = true,
    .backends = kCpuOnly,
    .attrs = &attrs_of<LstmAttrs>,
    .infer = infer_backward,
    .cpu = {backward_kernel, prepare},
    // Its example is the forward's: the gradients there are this op's outputs.
    .example = {.inputs = kInputs,
                .call = forward_example,
                .parity_tolerance = 1e-4,
                .reference = forward_reference},
});

}  // namespace
}  // namespace encore
