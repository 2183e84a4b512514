// oneDNN's LSTM and GRU primitives as the CPU fast path, as cuDNN is on the GPU: onednn_lstm
// and onednn_gru run a whole unidirectional sequence in one op, onednn_lstm_backward and
// onednn_gru_backward its gradients. The ops mirror cudnn_lstm / cudnn_gru
// (ops/cuda/cudnn_rnn.cpp): Keras' semantics, activation tanh and recurrent activation sigmoid
// (the primitives' only ones), inputs (x, h0, c0, W, R, b) and (x, h0, W, R, b).
//
// Our tensors are oneDNN's user layouts as they lie: x and y (batch, steps, features) are
// `ntc`, the states `ldnc` with one layer and direction, W (in, G U) and R (U, G U) `ldigo`,
// since oneDNN's gate orders are Keras': LSTM (i, f, c~, o), GRU (u, r, o) = Keras' (z, r, h).
// The LSTM's b (4U) is its `ldgo` bias. Keras' GRU with reset_after=True is oneDNN's
// linear-before-reset GRU, whose bias has four gates (b_u, b_r, b_o, b_o' inside the reset
// product): from Keras' (2, 3U) bias (input row 0, recurrent row 1) that is
// (b0z + b1z, b0r + b1r, b0h, b1h), built per call, and its gradient unpacked the same way.
// The primitive picks its own weight layouts (format `any`); the weights are reordered into them
// on every call (into this thread's scratch, by reorders made with the setup) so W, R and b
// stay ordinary parameters. float32
// only: there is no float64 RNN primitive, so the op table checks these rows against the
// composed recurrence in float32 (OpDef::backends, Example::reference) instead of against
// finite differences.
#include <cstring>
#include <memory>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "core/threads.h"
#include "ops/cpu/onednn.h"
#include "ops/defs/common.h"
#include "ops/nn.h"
#include "ops/ops.h"
#include "ops/prepared.h"

namespace encore {
namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

enum class Cell : uint8_t { Lstm, Gru };

// Where each cell's tensors sit among the ops' inputs and outputs.
struct CellInfo {
  const char* op;
  const char* backward_op;
  int gates;
  bool has_c;  // an LSTM's cell state: inputs (x, h0, c0, W, R, b), outputs (y, hT, cT, workspace)
  int w() const { return has_c ? 3 : 2; }          // the kernel's input index; R, b follow
  int num_inputs() const { return w() + 3; }       // of the forward op
  int workspace() const { return has_c ? 3 : 2; }  // the workspace's output index
  int num_backward_inputs() const { return num_inputs() + 2 * workspace() + 1; }
};
constexpr CellInfo kLstm{"onednn_lstm", "onednn_lstm_backward", 4, true};
constexpr CellInfo kGru{"onednn_gru", "onednn_gru_backward", 3, false};
constexpr const CellInfo& info(Cell c) { return c == Cell::Lstm ? kLstm : kGru; }

struct RnnKey {
  Cell cell;
  int64_t batch, steps, input, units;
  int threads;  // a primitive runs on the thread count it was created for
  bool operator==(const RnnKey&) const = default;
};

// `from` -> `to` when the layouts differ. Made with the setup: a reorder made per call costs
// its creation every call (encore keeps oneDNN's own primitive cache off, ops/cpu/onednn.h).
struct Reorder {
  std::optional<dnnl::reorder> primitive;
  Reorder() = default;
  Reorder(const dnnl::memory::desc& from, const dnnl::memory::desc& to) {
    if (from != to)
      primitive = dnnl::reorder(
          dnnl::reorder::primitive_desc(cpu::onednn_engine(), from, cpu::onednn_engine(), to));
  }
};

// The user-layout descriptors of one problem and the primitives on them. Immutable once built.
struct RnnSetup {
  RnnKey key;
  dnnl::memory::desc x, y, state, w, r, b;  // b: oneDNN's bias (4 gates for both cells)
  dnnl::rnn_primitive_desc_base fwd, bwd;
  dnnl::primitive forward, backward;
  // W and R into the forward's and the backward's layouts; their gradients back into ours.
  Reorder w_fwd, r_fwd, w_bwd, r_bwd, gw_out, gr_out;
};

std::shared_ptr<const RnnSetup> make_setup(const RnnKey& k) {
  dnnl::engine& e = cpu::onednn_engine();
  auto s = std::make_shared<RnnSetup>();
  s->key = k;
  const int64_t B = k.batch, T = k.steps, I = k.input, U = k.units, G = info(k.cell).gates;
  s->x = {{T, B, I}, dt::f32, tag::ntc};
  s->y = {{T, B, U}, dt::f32, tag::ntc};
  s->state = {{1, 1, B, U}, dt::f32, tag::ldnc};
  s->w = {{1, 1, I, G, U}, dt::f32, tag::ldigo};
  s->r = {{1, 1, U, G, U}, dt::f32, tag::ldigo};
  s->b = {{1, 1, 4, U}, dt::f32, tag::ldgo};
  const dnnl::memory::desc w_any({1, 1, I, G, U}, dt::f32, tag::any),
      r_any({1, 1, U, G, U}, dt::f32, tag::any);
  const auto dir = dnnl::rnn_direction::unidirectional_left2right;
  const auto training = dnnl::prop_kind::forward_training, backward = dnnl::prop_kind::backward;
  // Scratchpads per thread, not per primitive: threads may run one prepared primitive at once.
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  try {
    if (k.cell == Cell::Lstm) {
      const dnnl::lstm_forward::primitive_desc fwd(
          dnnl::lstm_forward::desc(training, dir, s->x, s->state, s->state, w_any, r_any, s->b,
                                   s->y, s->state, s->state),
          attr, e);
      const dnnl::lstm_backward::primitive_desc bwd(
          dnnl::lstm_backward::desc(backward, dir, s->x, s->state, s->state, w_any, r_any, s->b,
                                    s->y, s->state, s->state, s->x, s->state, s->state, w_any,
                                    r_any, s->b, s->y, s->state, s->state),
          attr, e, fwd);
      s->fwd = fwd, s->bwd = bwd;
      s->forward = dnnl::lstm_forward(fwd), s->backward = dnnl::lstm_backward(bwd);
    } else {
      const dnnl::lbr_gru_forward::primitive_desc fwd(
          dnnl::lbr_gru_forward::desc(training, dir, s->x, s->state, w_any, r_any, s->b, s->y,
                                      s->state),
          attr, e);
      const dnnl::lbr_gru_backward::primitive_desc bwd(
          dnnl::lbr_gru_backward::desc(backward, dir, s->x, s->state, w_any, r_any, s->b, s->y,
                                       s->state, s->x, s->state, w_any, r_any, s->b, s->y,
                                       s->state),
          attr, e, fwd);
      s->fwd = fwd, s->bwd = bwd;
      s->forward = dnnl::lbr_gru_forward(fwd), s->backward = dnnl::lbr_gru_backward(bwd);
    }
    s->w_fwd = Reorder(s->w, s->fwd.weights_layer_desc());
    s->r_fwd = Reorder(s->r, s->fwd.weights_iter_desc());
    s->w_bwd = Reorder(s->w, s->bwd.weights_layer_desc());
    s->r_bwd = Reorder(s->r, s->bwd.weights_iter_desc());
    s->gw_out = Reorder(s->bwd.diff_weights_layer_desc(), s->w);
    s->gr_out = Reorder(s->bwd.diff_weights_iter_desc(), s->r);
  } catch (const dnnl::error& err) {
    throw BackendError(std::string("[") + info(k.cell).op +
                       "] oneDNN RNN creation failed: " + err.what());
  }
  return s;
}

const Shape& shape_of(const Tensor& t) { return t.shape(); }
const Shape& shape_of(const TensorRef& t) { return t.shape; }
template <class T> RnnKey key_of(Cell cell, const T& x, const T& h0) {
  const Shape &xs = shape_of(x), &hs = shape_of(h0);
  return {cell, xs[0], xs[1], xs[2], hs[1], num_threads()};
}

template <Cell C> std::shared_ptr<void> make_setup_of(const KernelCtx& c) {
  sync_threads();  // oneDNN reads the creating thread's OpenMP count
  return std::const_pointer_cast<RnnSetup>(make_setup(key_of(C, c.in[0], c.in[1])));
}

// Shape inference needs the workspace size (an output) before any kernel state exists: the
// setup of (x, h0) is kept in the dispatcher's cache as a setup of its own (ops/prepared.h),
// which the kernels' states share.
template <Cell C, class T>
std::shared_ptr<const RnnSetup> setup_for(const T& x, const T& h0, const Attrs& attrs) {
  const auto ref = [](const T& t) {
    return TensorRef{nullptr, shape_of(t), contiguous_strides(shape_of(t)), DType::Float32,
                     Device::cpu()};
  };
  const TensorRef tensors[] = {ref(x), ref(h0)};
  return std::static_pointer_cast<const RnnSetup>(
      prepared_setup(op(info(C).op), Device::cpu(), tensors, attrs, make_setup_of<C>));
}

int64_t workspace_floats(const RnnSetup& s) {
  return static_cast<int64_t>((s.fwd.workspace_desc().get_size() + 3) / 4);
}

// `in`: the forward op's inputs.
void check_inputs(Cell c, const char* op, std::span<const Tensor> in, const Attrs& attrs) {
  const CellInfo& cell = info(c);
  const auto& a = attrs.as<LstmAttrs>();
  ENCORE_CHECK(a.activation == Activation::Tanh && a.recurrent_activation == Activation::Sigmoid,
               UnsupportedError, "[", op, "] oneDNN's ", cell.has_c ? "LSTM" : "GRU",
               " computes activation=tanh, recurrent_activation=sigmoid; got ", a.str(),
               cell.has_c ? " (use the composed LSTM)" : " (use the composed GRU)");
  for (size_t i = 0; i < in.size(); ++i)
    ENCORE_CHECK(in[i].dtype() == DType::Float32 && in[i].device().is_cpu(), DTypeError, "[", op,
                 "] needs float32 CPU tensors; input ", i, " is ", describe(in[i]));
  const Tensor& x = in[0];
  ENCORE_CHECK(x.dim() == 3 && x.shape()[0] >= 1 && x.shape()[1] >= 1 && x.shape()[2] >= 1,
               ShapeError, "[", op, "] input must be (batch, steps >= 1, features), got ",
               x.shape().str());
  const int64_t batch = x.shape()[0], input = x.shape()[2], g = cell.gates;
  const int64_t units = in[1].dim() == 2 ? in[1].shape()[1] : 0;
  const Shape state{batch, units};
  const Shape bias = cell.has_c ? Shape{g * units} : Shape{2, g * units};
  const int wi = cell.w();
  ENCORE_CHECK(units >= 1 && in[1].shape() == state && (!cell.has_c || in[2].shape() == state) &&
                   in[wi].shape() == Shape({input, g * units}) &&
                   in[wi + 1].shape() == Shape({units, g * units}) && in[wi + 2].shape() == bias,
               ShapeError, "[", op, "] for input ", x.shape().str(), " expects h0",
               cell.has_c ? " and c0" : "", " (batch, units), kernel (", input, ", ", g,
               " * units), recurrent kernel (units, ", g, " * units) and bias ",
               cell.has_c ? "(4 * units)" : "(2, 3 * units)", "; got ", in[1].shape().str(), ", ",
               in[wi].shape().str(), ", ", in[wi + 1].shape().str(), ", ",
               in[wi + 2].shape().str());
}

// onednn_lstm(x, h0, c0, W, R, b) -> (y (B, T, U), hT, cT, workspace)
// onednn_gru(x, h0, W, R, b) -> (y (B, T, U), hT, workspace)
template <Cell C>
int infer_forward(const OpDef&, std::span<const Tensor> in, const Attrs& attrs, TensorMeta* out) {
  const CellInfo& cell = info(C);
  check_inputs(C, cell.op, in, attrs);
  const Tensor& x = in[0];
  const auto s = setup_for<C>(in[0], in[1], attrs);
  out[0] = defs::meta({x.shape()[0], x.shape()[1], in[1].shape()[1]}, DType::Float32, x.device());
  for (int i = 1; i < cell.workspace(); ++i) out[i] = defs::meta_like(in[1]);
  out[cell.workspace()] = defs::meta({workspace_floats(*s)}, DType::Float32, x.device());
  return cell.workspace() + 1;
}

// The backward op's inputs: the forward's, then all its outputs (y, hT, [cT,] workspace) and
// the gradients of all but the workspace.
template <Cell C> void bw_forward(const BackwardCtx& c, Tensor* g) {
  const CellInfo& cell = info(C);
  auto grad = [&](int i) { return c.grads[i].defined() ? c.grads[i] : zeros_like(c.outputs[i]); };
  std::vector<Tensor> in(c.inputs.begin(), c.inputs.end());
  for (int i = 0; i <= cell.workspace(); ++i) in.push_back(c.outputs[i]);
  for (int i = 0; i < cell.workspace(); ++i) in.push_back(grad(i));
  const OutList r = dispatch(op(cell.backward_op), in, c.attrs);
  for (int i = 0; i < cell.num_inputs(); ++i)
    if (c.need(i)) g[i] = r[i];
}

// onednn_lstm_backward(x, h0, c0, W, R, b, y, hT, cT, workspace, gy, ghT, gcT)
//   -> (gx, gh0, gc0, gW, gR, gb)
// onednn_gru_backward(x, h0, W, R, b, y, hT, workspace, gy, ghT) -> (gx, gh0, gW, gR, gb)
template <Cell C>
int infer_backward(const OpDef&, std::span<const Tensor> in, const Attrs& attrs, TensorMeta* out) {
  const CellInfo& cell = info(C);
  const int n = cell.num_inputs(), ws = n + cell.workspace();
  check_inputs(C, cell.backward_op, in.subspan(0, n), attrs);
  const Tensor& x = in[0];
  const Shape y{x.shape()[0], x.shape()[1], in[1].shape()[1]};
  const auto s = setup_for<C>(in[0], in[1], attrs);
  bool ok = in[n].shape() == y && in[ws + 1].shape() == y &&
            in[ws].shape() == Shape({workspace_floats(*s)});
  for (int i = 1; i < cell.workspace(); ++i)
    ok = ok && in[n + i].shape() == in[1].shape() && in[ws + 1 + i].shape() == in[1].shape();
  ENCORE_CHECK(ok, ShapeError, "[", cell.backward_op,
               "] outputs and gradients do not match the input ", x.shape().str());
  for (int i = n; i < cell.num_backward_inputs(); ++i)
    ENCORE_CHECK(in[i].dtype() == DType::Float32 && in[i].device().is_cpu(), DTypeError, "[",
                 cell.backward_op, "] input ", i, " ", describe(in[i]),
                 " must be float32 on the CPU");
  for (int i = 0; i < n; ++i) out[i] = defs::meta_like(in[i]);
  return n;
}

// ---- kernels -----------------------------------------------------------------------------

template <Cell C> std::shared_ptr<void> prepare(const KernelCtx& c) {
  return std::const_pointer_cast<RnnSetup>(setup_for<C>(c.in[0], c.in[1], c.attrs));
}

template <Cell C> const RnnSetup& setup_of(const KernelCtx& c) {
  const auto& s = *static_cast<const RnnSetup*>(c.state);
  ENCORE_CHECK(s.key == key_of(C, c.in[0], c.in[1]), BackendError, "[", c.op,
               "] called with a prepared state made for another shape");
  return s;
}

dnnl::memory user(const dnnl::memory::desc& d, const TensorRef& t) {
  return dnnl::memory(d, cpu::onednn_engine(), t.data);
}

// `from` in the layout `to` (this thread's scratch slot `slot` when that differs).
dnnl::memory in_layout(const Reorder& r, dnnl::memory from, const dnnl::memory::desc& to,
                       int slot) {
  if (!r.primitive) return from;
  dnnl::memory m(to, cpu::onednn_engine(), cpu::thread_scratch(slot, to.get_size()));
  r.primitive->execute(cpu::onednn_stream(), from, m);
  return m;
}

// The primitive's scratchpad: this thread's scratch slot 6.
dnnl::memory scratchpad(const dnnl::rnn_primitive_desc_base& pd) {
  const dnnl::memory::desc d = pd.scratchpad_desc();
  return dnnl::memory(d, cpu::onednn_engine(), cpu::thread_scratch(6, d.get_size()));
}

// oneDNN's bias from ours: the LSTM's as it lies; the GRU's four gates from Keras' two rows
// (see the file comment), in this thread's scratch slot 2.
template <Cell C> dnnl::memory bias(const RnnSetup& s, const TensorRef& b) {
  if constexpr (C == Cell::Lstm) {
    return user(s.b, b);
  } else {
    const int64_t u = s.key.units;
    const float* k = b.ptr<float>();  // (2, 3U)
    auto* o = reinterpret_cast<float*>(cpu::thread_scratch(2, s.b.get_size()));
    for (int64_t i = 0; i < 2 * u; ++i) o[i] = k[i] + k[3 * u + i];
    for (int64_t i = 0; i < u; ++i) o[2 * u + i] = k[2 * u + i], o[3 * u + i] = k[5 * u + i];
    return dnnl::memory(s.b, cpu::onednn_engine(), o);
  }
}

// Our bias's gradient from oneDNN's: the GRU's summed gates feed both rows.
template <Cell C> void unpack_bias_grad(const RnnSetup& s, const float* g, float* out) {
  const int64_t u = s.key.units;
  if constexpr (C == Cell::Lstm) {
    std::memcpy(out, g, static_cast<size_t>(4 * u) * sizeof(float));
  } else {
    std::memcpy(out, g, static_cast<size_t>(3 * u) * sizeof(float));
    std::memcpy(out + 3 * u, g, static_cast<size_t>(2 * u) * sizeof(float));
    std::memcpy(out + 5 * u, g + 3 * u, static_cast<size_t>(u) * sizeof(float));
  }
}

template <Cell C> void forward_kernel(const KernelCtx& c) {
  const CellInfo& cell = info(C);
  const RnnSetup& s = setup_of<C>(c);
  dnnl::engine& e = cpu::onednn_engine();
  dnnl::stream& st = cpu::onednn_stream();
  const int w = cell.w();
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC_LAYER, user(s.x, c.in[0])},
      {DNNL_ARG_SRC_ITER, user(s.state, c.in[1])},
      {DNNL_ARG_WEIGHTS_LAYER,
       in_layout(s.w_fwd, user(s.w, c.in[w]), s.fwd.weights_layer_desc(), 0)},
      {DNNL_ARG_WEIGHTS_ITER,
       in_layout(s.r_fwd, user(s.r, c.in[w + 1]), s.fwd.weights_iter_desc(), 1)},
      {DNNL_ARG_BIAS, bias<C>(s, c.in[w + 2])},
      {DNNL_ARG_DST_LAYER, user(s.y, c.out[0])},
      {DNNL_ARG_DST_ITER, user(s.state, c.out[1])},
      {DNNL_ARG_WORKSPACE, dnnl::memory(s.fwd.workspace_desc(), e, c.out[cell.workspace()].data)},
      {DNNL_ARG_SCRATCHPAD, scratchpad(s.fwd)}};
  if (cell.has_c) {
    args.emplace(DNNL_ARG_SRC_ITER_C, user(s.state, c.in[2]));
    args.emplace(DNNL_ARG_DST_ITER_C, user(s.state, c.out[2]));
  }
  s.forward.execute(st, args);
  st.wait();
}

template <Cell C> void backward_kernel(const KernelCtx& c) {
  const CellInfo& cell = info(C);
  const RnnSetup& s = setup_of<C>(c);
  dnnl::engine& e = cpu::onednn_engine();
  dnnl::stream& st = cpu::onednn_stream();
  const int w = cell.w(), n = cell.num_inputs(), ws = n + cell.workspace();
  // The primitive adds the weights' gradients into its buffers: they start at zero.
  auto zeroed = [&](const dnnl::memory::desc& d, int slot) {
    std::byte* p = cpu::thread_scratch(slot, d.get_size());
    std::memset(p, 0, d.get_size());
    return dnnl::memory(d, e, p);
  };
  const dnnl::memory gw = zeroed(s.bwd.diff_weights_layer_desc(), 3),
                     gr = zeroed(s.bwd.diff_weights_iter_desc(), 4),
                     gb = zeroed(s.bwd.diff_bias_desc(), 5);
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC_LAYER, user(s.x, c.in[0])},
      {DNNL_ARG_SRC_ITER, user(s.state, c.in[1])},
      {DNNL_ARG_WEIGHTS_LAYER,
       in_layout(s.w_bwd, user(s.w, c.in[w]), s.bwd.weights_layer_desc(), 0)},
      {DNNL_ARG_WEIGHTS_ITER,
       in_layout(s.r_bwd, user(s.r, c.in[w + 1]), s.bwd.weights_iter_desc(), 1)},
      {DNNL_ARG_BIAS, bias<C>(s, c.in[w + 2])},
      {DNNL_ARG_DST_LAYER, user(s.y, c.in[n])},
      {DNNL_ARG_DST_ITER, user(s.state, c.in[n + 1])},
      {DNNL_ARG_WORKSPACE, dnnl::memory(s.bwd.workspace_desc(), e, c.in[ws].data)},
      {DNNL_ARG_DIFF_DST_LAYER, user(s.y, c.in[ws + 1])},
      {DNNL_ARG_DIFF_DST_ITER, user(s.state, c.in[ws + 2])},
      {DNNL_ARG_DIFF_SRC_LAYER, user(s.x, c.out[0])},
      {DNNL_ARG_DIFF_SRC_ITER, user(s.state, c.out[1])},
      {DNNL_ARG_DIFF_WEIGHTS_LAYER, gw},
      {DNNL_ARG_DIFF_WEIGHTS_ITER, gr},
      {DNNL_ARG_DIFF_BIAS, gb},
      {DNNL_ARG_SCRATCHPAD, scratchpad(s.bwd)}};
  if (cell.has_c) {
    args.emplace(DNNL_ARG_SRC_ITER_C, user(s.state, c.in[2]));
    args.emplace(DNNL_ARG_DST_ITER_C, user(s.state, c.in[n + 2]));
    args.emplace(DNNL_ARG_DIFF_DST_ITER_C, user(s.state, c.in[ws + 3]));
    args.emplace(DNNL_ARG_DIFF_SRC_ITER_C, user(s.state, c.out[2]));
  }
  s.backward.execute(st, args);
  // The gradients' layouts are oneDNN's choice; ours get them through a reorder (or a copy).
  for (auto [r, from, to] : {std::tuple{&s.gw_out, gw, user(s.w, c.out[w])},
                             std::tuple{&s.gr_out, gr, user(s.r, c.out[w + 1])}}) {
    if (r->primitive)
      r->primitive->execute(st, from, to);
    else
      std::memcpy(to.get_data_handle(), from.get_data_handle(), to.get_desc().get_size());
  }
  st.wait();
  unpack_bias_grad<C>(s, static_cast<const float*>(gb.get_data_handle()),
                      c.out[w + 2].ptr<float>());
}

// ---- the op table's examples ---------------------------------------------------------------

const LstmAttrs kTanhSigmoid{Activation::Tanh, Activation::Sigmoid};

// The forward's outputs, and through autograd the gradients of the sum of their squares (every
// output's gradient takes part, each element's its own).
Outputs with_gradients(std::span<const Tensor> x, Outputs (*rnn)(std::span<const Tensor>)) {
  std::vector<Tensor> in;
  for (const Tensor& t : x) in.push_back(t.detach().clone().set_requires_grad(true));
  Outputs y = rnn(in);
  Tensor loss = zeros({}, x[0].dtype());
  for (const Tensor& t : y) loss = loss + sum(t * t);
  loss.backward();
  for (const Tensor& t : in) y.push_back(t.grad());
  for (Tensor& t : y) t = t.detach();
  return y;
}

template <Cell C> Outputs fused(std::span<const Tensor> in) {
  const OutList r = dispatch(op(info(C).op), in, kTanhSigmoid);
  return Outputs(r.t.begin(), r.t.begin() + info(C).workspace());
}

// Keras' cells step by step from the initial state, composed: what the fused ops must equal.
Outputs composed_lstm(std::span<const Tensor> in) {
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
Outputs composed_gru(std::span<const Tensor> in) {
  const Tensor &x = in[0], &w = in[2], &r = in[3], &b = in[4];
  Tensor h = in[1];
  std::vector<Tensor> ys;
  for (int64_t t = 0; t < x.shape()[1]; ++t) {
    const Tensor xz = matmul(x.slice(1, t, t + 1).squeeze(1), w) + b.slice(0, 0, 1).squeeze(0);
    const Tensor hz = matmul(h, r) + b.slice(0, 1, 2).squeeze(0);
    h = gru_cell(xz, hz, h, Activation::Tanh, Activation::Sigmoid);
    ys.push_back(h);
  }
  return {stack(ys, 1), h};
}

template <Cell C> Outputs example(std::span<const Tensor> x) { return with_gradients(x, fused<C>); }
template <Cell C> Outputs reference(std::span<const Tensor> x) {
  return with_gradients(x, C == Cell::Lstm ? composed_lstm : composed_gru);
}

const std::vector<ExampleInput> kLstmInputs = {{{2, 5, 3}}, {{2, 4}},  {{2, 4}},
                                               {{3, 16}},   {{4, 16}}, {{16}}};
const std::vector<ExampleInput> kGruInputs = {
    {{2, 5, 3}}, {{2, 4}}, {{3, 12}}, {{4, 12}}, {{2, 12}}};
constexpr uint8_t kCpuOnly = 1u << static_cast<int>(DeviceType::CPU);

// The backward rows' examples are the forwards': the gradients there are their outputs.
template <Cell C> OpDef row(bool backward) {
  const CellInfo& cell = info(C);
  const int n = backward ? cell.num_backward_inputs() : cell.num_inputs();
  return {
      .name = backward ? cell.backward_op : cell.op,
      .min_inputs = static_cast<int8_t>(n),
      .max_inputs = static_cast<int8_t>(n),
      .save = backward ? Save::None : Save::Inputs | Save::Outputs,
      .contiguous_inputs = true,
      .backends = kCpuOnly,
      .fused_cell = backward          ? RecurrentCell::None
                    : C == Cell::Lstm ? RecurrentCell::Lstm
                                      : RecurrentCell::Gru,
      .attrs = &attrs_of<LstmAttrs>,
      .infer = backward ? infer_backward<C> : infer_forward<C>,
      .backward = backward ? nullptr : bw_forward<C>,
      .cpu = {backward ? backward_kernel<C> : forward_kernel<C>, prepare<C>},
      .examples = {{.inputs = C == Cell::Lstm ? kLstmInputs : kGruInputs,
                    .call = example<C>,
                    .parity_tolerance = 1e-4,
                    .reference = reference<C>}},
  };
}

OpDef& onednn_lstm_op = define_op(row<Cell::Lstm>(false));
OpDef& onednn_lstm_backward_op = define_op(row<Cell::Lstm>(true));
OpDef& onednn_gru_op = define_op(row<Cell::Gru>(false));
OpDef& onednn_gru_backward_op = define_op(row<Cell::Gru>(true));

}  // namespace
}  // namespace encore
