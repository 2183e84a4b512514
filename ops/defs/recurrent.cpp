// Whole recurrent sequences in one op each, from a zero state: lstm_sequence and gru_sequence
// (GRU's reset_after form) take the input projections of all steps (one GEMM, done by the
// layer) and the recurrent kernel; per step they run one recurrent GEMM (into that step's rows)
// and one fused gate pass (ops/lstm_math.h, ops/gru_math.h). Their backward ops run the steps
// in reverse with one GEMM per step for the state's gradient, and the recurrent kernel's
// gradient as one GEMM over all steps per batch row at the end. No per-step tensors, slices or
// dispatches: eager and replay do the same work, linear in the length. Their first output, the
// states h (B, T, U), is aligned with the input steps also when `reverse` processes them last
// to first; the others are saved for the backward pass only (not differentiable).
// In float32 the per-step GEMMs run oneDNN's matmul, prepared per shape, on the recurrent
// kernel laid out once per call as the primitive wants it (the backward ops' R^T made
// contiguous): OpenBLAS took 7-10x as long for the 400 steps of (32, 512) @ (512, 2048) with
// the rows strided as they are here (measured on 2 threads: it packs the whole 4 MB kernel
// inside every call).

#include <cstring>
#include <type_traits>

#include "core/parallel.h"
#include "ops/cpu/gemm.h"
#include "ops/cpu/onednn.h"
#include "ops/defs/common.h"
#include "ops/gru_math.h"
#include "ops/nn.h"

namespace encore {
namespace {

const OpDef& lstm_sequence_backward_op();
const OpDef& gru_sequence_backward_op();

// lstm_sequence(xw (B, T, 4U), R (U, 4U)) -> (y (B, T, U), c (B, T, U), z (B, T, 4U))
int infer_lstm_sequence(const OpDef&, std::span<const Tensor> in, const Attrs&, TensorMeta* out) {
  const Tensor &xw = in[0], &r = in[1];
  defs::require_float("lstm_sequence", xw);
  defs::require_same_dtype("lstm_sequence", xw, r);
  ENCORE_CHECK(xw.dim() == 3 && r.dim() == 2 && r.shape()[1] == 4 * r.shape()[0] &&
                   xw.shape()[2] == r.shape()[1],
               ShapeError, "[lstm_sequence] projections ", xw.shape().str(),
               " must be (batch, steps, 4 * units) for the recurrent kernel ", r.shape().str(),
               " (units, 4 * units)");
  const Shape states{xw.shape()[0], xw.shape()[1], r.shape()[0]};
  out[0] = out[1] = defs::meta(states, xw.dtype(), xw.device());
  out[2] = defs::meta_like(xw);
  return 3;
}
void bw_lstm_sequence(const BackwardCtx& c, Tensor* g) {
  ENCORE_CHECK(!c.grads[1].defined() && !c.grads[2].defined(), ValueError,
               "[lstm_sequence] its cell states and gates are saved for the backward pass and "
               "not differentiable");
  const Tensor& y = c.outputs[0];
  const Tensor in[] = {c.inputs[1], y, c.outputs[1], c.outputs[2],
                       c.grads[0].defined() ? c.grads[0] : zeros_like(y)};
  const OutList r = dispatch(lstm_sequence_backward_op(), in, c.attrs);
  g[0] = r[0];
  g[1] = r[1];
}

// lstm_sequence_backward(R, y, c, z, gy) -> (gxw (B, T, 4U), gR (U, 4U), work (2, B, U))
int infer_lstm_sequence_backward(const OpDef&, std::span<const Tensor> in, const Attrs&,
                                 TensorMeta* out) {
  const Tensor& y = in[1];
  ENCORE_CHECK(in[2].shape() == y.shape() && in[4].shape() == y.shape() && y.dim() == 3 &&
                   in[3].shape() == Shape({y.shape()[0], y.shape()[1], in[0].shape()[1]}),
               ShapeError, "[lstm_sequence_backward] states ", y.shape().str(),
               " do not match the cell states, gates and gradient ", in[2].shape().str(), ", ",
               in[3].shape().str(), ", ", in[4].shape().str());
  out[0] = defs::meta_like(in[3]);
  out[1] = defs::meta_like(in[0]);
  out[2] = defs::meta({2, y.shape()[0], y.shape()[2]}, y.dtype(), y.device());
  return 3;
}

// gru_sequence(xw (B, T, 3U), R (U, 3U), b_rec (3U)) -> (y (B, T, U), hz (B, T, 3U))
int infer_gru_sequence(const OpDef&, std::span<const Tensor> in, const Attrs&, TensorMeta* out) {
  const Tensor &xw = in[0], &r = in[1], &b = in[2];
  defs::require_float("gru_sequence", xw);
  defs::require_same_dtype("gru_sequence", xw, r);
  defs::require_same_dtype("gru_sequence", xw, b);
  ENCORE_CHECK(xw.dim() == 3 && r.dim() == 2 && r.shape()[1] == 3 * r.shape()[0] &&
                   xw.shape()[2] == r.shape()[1] && b.shape() == Shape({r.shape()[1]}),
               ShapeError, "[gru_sequence] projections ", xw.shape().str(),
               " must be (batch, steps, 3 * units) for the recurrent kernel ", r.shape().str(),
               " (units, 3 * units) and recurrent bias ", b.shape().str(), " (3 * units)");
  out[0] = defs::meta({xw.shape()[0], xw.shape()[1], r.shape()[0]}, xw.dtype(), xw.device());
  out[1] = defs::meta_like(xw);
  return 2;
}
void bw_gru_sequence(const BackwardCtx& c, Tensor* g) {
  ENCORE_CHECK(!c.grads[1].defined(), ValueError,
               "[gru_sequence] its recurrent projections are saved for the backward pass and not "
               "differentiable");
  const Tensor& y = c.outputs[0];
  const Tensor in[] = {c.inputs[0], c.inputs[1], y, c.outputs[1],
                       c.grads[0].defined() ? c.grads[0] : zeros_like(y)};
  const OutList r = dispatch(gru_sequence_backward_op(), in, c.attrs);
  for (int i = 0; i < 3; ++i)
    if (c.need(i)) g[i] = r[i];
}

// gru_sequence_backward(xw, R, y, hz, gy) -> (gxw, gR, gb_rec, ghz (B, T, 3U), work (2, B, U))
int infer_gru_sequence_backward(const OpDef&, std::span<const Tensor> in, const Attrs&,
                                TensorMeta* out) {
  const Tensor &xw = in[0], &y = in[2];
  ENCORE_CHECK(in[3].shape() == xw.shape() && in[4].shape() == y.shape() && y.dim() == 3 &&
                   xw.dim() == 3 && y.shape()[0] == xw.shape()[0] && y.shape()[1] == xw.shape()[1],
               ShapeError, "[gru_sequence_backward] states ", y.shape().str(),
               " do not match the projections and gradient ", xw.shape().str(), ", ",
               in[3].shape().str(), ", ", in[4].shape().str());
  out[0] = out[3] = defs::meta_like(xw);
  out[1] = defs::meta_like(in[1]);
  out[2] = defs::meta({in[1].shape()[1]}, xw.dtype(), xw.device());
  out[4] = defs::meta({2, y.shape()[0], y.shape()[2]}, y.dtype(), y.device());
  return 5;
}

// The per-step product of a float32 sequence kernel, prepared per shape: C (m, n; rows ldc
// apart) = A (m, k; rows lda apart) @ W (+ C when `accumulate`), W = R (k, n) or, for the
// backward ops, R^T with R (n, k), reordered into the layout the primitive chose.
struct StepGemm {
  dnnl::matmul primitive;
  dnnl::memory::desc a, c, r, w, scratchpad;  // r: R as it lies
  dnnl::reorder pack;                         // r -> w
};

std::shared_ptr<void> step_gemm(int64_t m, int64_t k, int64_t n, int64_t lda, int64_t ldc,
                                bool transposed, bool accumulate) {
  using dt = dnnl::memory::data_type;
  using dims = dnnl::memory::dims;
  dnnl::engine& e = cpu::onednn_engine();
  auto p = std::make_shared<StepGemm>();
  p->a = dnnl::memory::desc({m, k}, dt::f32, dims{lda, 1});
  p->c = dnnl::memory::desc({m, n}, dt::f32, dims{ldc, 1});
  p->r = dnnl::memory::desc({k, n}, dt::f32, transposed ? dims{1, k} : dims{n, 1});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (accumulate) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
  }
  try {
    const dnnl::matmul::primitive_desc pd(
        dnnl::matmul::desc(p->a, dnnl::memory::desc({k, n}, dt::f32, dnnl::memory::format_tag::any),
                           p->c),
        attr, e);
    p->primitive = dnnl::matmul(pd);
    p->w = pd.weights_desc();
    p->scratchpad = pd.scratchpad_desc();
    p->pack = dnnl::reorder(dnnl::reorder::primitive_desc(e, p->r, e, p->w));
  } catch (const dnnl::error& err) {
    throw BackendError(std::string("[recurrent] oneDNN matmul creation failed: ") + err.what());
  }
  return p;
}

// A kernel call's per-step products: the recurrent kernel reordered once, then one matmul per
// step; the BLAS GEMM where nothing was prepared (float64, empty shapes).
template <class T> class StepProducts {
 public:
  StepProducts(const void* state, const T* r) : g_(static_cast<const StepGemm*>(state)) {
    if (!g_) return;
    dnnl::engine& e = cpu::onednn_engine();
    w_ = cpu::thread_scratch(0, g_->w.get_size());
    scratchpad_ = cpu::thread_scratch(1, g_->scratchpad.get_size());
    dnnl::memory from(g_->r, e, const_cast<T*>(r)), to(g_->w, e, w_);
    g_->pack.execute(cpu::onednn_stream(), from, to);
  }
  explicit operator bool() const { return g_ != nullptr; }
  void operator()(const T* a, T* c) const {
    dnnl::engine& e = cpu::onednn_engine();
    g_->primitive.execute(cpu::onednn_stream(),
                          {{DNNL_ARG_SRC, dnnl::memory(g_->a, e, const_cast<T*>(a))},
                           {DNNL_ARG_WEIGHTS, dnnl::memory(g_->w, e, w_)},
                           {DNNL_ARG_DST, dnnl::memory(g_->c, e, c)},
                           {DNNL_ARG_SCRATCHPAD, dnnl::memory(g_->scratchpad, e, scratchpad_)}});
    cpu::onednn_stream().wait();
  }

 private:
  const StepGemm* g_;
  std::byte* w_ = nullptr;
  std::byte* scratchpad_ = nullptr;
};

// gR += sum over steps of h_prev^T gz, gz (B, T, width): per batch row one GEMM over all steps
// but the first processed (its h_prev is zero).
template <class T>
void recurrent_kernel_grad(const T* y, const T* gz, T* gr, int64_t batch, int64_t steps,
                           int64_t units, int64_t width, bool reverse) {
  const int64_t first = reverse ? 1 : 0;  // the first row of y that is some step's h_prev
  for (int64_t b = 0; b < batch && steps > 1; ++b)
    cpu::gemm(true, false, units, width, steps - 1, y + seq_row(b, first, steps, units), units,
              gz + seq_row(b, 1 - first, steps, width), width, T(1), gr, width);
}

// One step's cells, f(b, u, act, rec) for every unit of every batch row. The rows are
// independent, so a step with enough units splits them over the pool between its GEMMs (one
// thread ran them while the others waited: 0.5 s of the BiLSTM(512) step). The activation
// pairs of Keras' LSTM and GRU (tanh or relu, with sigmoid gates) get their own copy of the loop
// with both activations known at compile time: the switch per gate and element folds away.
// Same arithmetic in every copy and chunking, so the results do not change.
constexpr int64_t kParallelCells = 4096;

template <class F>
void step_cells(int64_t batch, int64_t units, const RecurrenceAttrs& a, const F& f) {
  using A = Activation;
  const auto run = [&](auto act, auto rec) {
    parallel_for(batch, (kParallelCells + units - 1) / std::max<int64_t>(units, 1),
                 [&](int64_t b0, int64_t b1) noexcept {
                   for (int64_t b = b0; b < b1; ++b)
                     for (int64_t u = 0; u < units; ++u) f(b, u, act, rec);
                 });
  };
  constexpr auto sigmoid = std::integral_constant<A, A::Sigmoid>{};
  if (a.recurrent_activation == A::Sigmoid && a.activation == A::Tanh)
    return run(std::integral_constant<A, A::Tanh>{}, sigmoid);
  if (a.recurrent_activation == A::Sigmoid && a.activation == A::Relu)
    return run(std::integral_constant<A, A::Relu>{}, sigmoid);
  run(a.activation, a.recurrent_activation);
}

template <class T> void lstm_sequence_cpu(const KernelCtx& c) {
  const auto& a = c.attrs.as<RecurrenceAttrs>();
  const int64_t batch = c.in[0].shape[0], steps = c.in[0].shape[1], units = c.in[1].shape[0];
  const int64_t g = 4 * units;
  const T* r = c.in[1].ptr<const T>();
  T* y = c.out[0].ptr<T>();
  T* cs = c.out[1].ptr<T>();
  T* z = c.out[2].ptr<T>();
  if (batch * steps * units == 0) return;
  std::memcpy(z, c.in[0].data, batch * steps * g * sizeof(T));
  const StepProducts<T> product(c.state, r);
  for (int64_t s = 0; s < steps; ++s) {
    const int64_t t = seq_step(s, steps, a.reverse), tp = seq_step(s - 1, steps, a.reverse);
    // z_t += h_prev R: rows b of y and z at step t lie steps * width apart.
    if (tp >= 0 && product)
      product(y + tp * units, z + t * g);
    else if (tp >= 0)
      cpu::gemm(false, false, batch, g, units, y + tp * units, steps * units, r, g, T(1), z + t * g,
                steps * g);
    step_cells(batch, units, a, [&](int64_t b, int64_t u, auto act, auto rec) {
      lstm_sequence_unit(z, y, cs, b, u, t, tp, steps, units, act, rec);
    });
  }
}

template <class T> void lstm_sequence_backward_cpu(const KernelCtx& c) {
  const auto& a = c.attrs.as<RecurrenceAttrs>();
  const int64_t batch = c.in[1].shape[0], steps = c.in[1].shape[1], units = c.in[1].shape[2];
  const int64_t g = 4 * units;
  const T* r = c.in[0].ptr<const T>();
  const T* y = c.in[1].ptr<const T>();
  const T* cs = c.in[2].ptr<const T>();
  const T* z = c.in[3].ptr<const T>();
  const T* gy = c.in[4].ptr<const T>();
  T* gz = c.out[0].ptr<T>();
  T* gr = c.out[1].ptr<T>();
  T* dh = c.out[2].ptr<T>();
  T* dc = dh + batch * units;
  std::memset(gr, 0, units * g * sizeof(T));
  if (batch * steps * units == 0) return;
  std::memset(dc, 0, batch * units * sizeof(T));
  const StepProducts<T> product(c.state, r);
  for (int64_t s = steps - 1; s >= 0; --s) {
    const int64_t t = seq_step(s, steps, a.reverse), tp = seq_step(s - 1, steps, a.reverse),
                  tn = seq_step(s + 1, steps, a.reverse);
    // What the successor's gates send back to h_t: dh = gz_next R^T.
    if (tn >= 0 && product)
      product(gz + tn * g, dh);
    else if (tn >= 0)
      cpu::gemm(false, true, batch, units, g, gz + tn * g, steps * g, r, g, T(0), dh, units);
    const T* dh_rec = tn >= 0 ? dh : nullptr;
    step_cells(batch, units, a, [&](int64_t b, int64_t u, auto act, auto rec) {
      lstm_sequence_backward_unit(z, cs, gy, dh_rec, dc, gz, b, u, t, tp, steps, units, act, rec);
    });
  }
  recurrent_kernel_grad(y, gz, gr, batch, steps, units, g, a.reverse);
}

template <class T> void gru_sequence_cpu(const KernelCtx& c) {
  const auto& a = c.attrs.as<RecurrenceAttrs>();
  const int64_t batch = c.in[0].shape[0], steps = c.in[0].shape[1], units = c.in[1].shape[0];
  const int64_t g = 3 * units;
  const T* xw = c.in[0].ptr<const T>();
  const T* r = c.in[1].ptr<const T>();
  const T* bias = c.in[2].ptr<const T>();
  T* y = c.out[0].ptr<T>();
  T* hz = c.out[1].ptr<T>();
  if (batch * steps * units == 0) return;
  const StepProducts<T> product(c.state, r);
  for (int64_t s = 0; s < steps; ++s) {
    const int64_t t = seq_step(s, steps, a.reverse), tp = seq_step(s - 1, steps, a.reverse);
    // hz_t = b_rec + h_prev R
    for (int64_t b = 0; b < batch; ++b)
      std::memcpy(hz + seq_row(b, t, steps, g), bias, g * sizeof(T));
    if (tp >= 0 && product)
      product(y + tp * units, hz + t * g);
    else if (tp >= 0)
      cpu::gemm(false, false, batch, g, units, y + tp * units, steps * units, r, g, T(1),
                hz + t * g, steps * g);
    step_cells(batch, units, a, [&](int64_t b, int64_t u, auto act, auto rec) {
      gru_sequence_unit(xw, hz, y, b, u, t, tp, steps, units, act, rec);
    });
  }
}

template <class T> void gru_sequence_backward_cpu(const KernelCtx& c) {
  const auto& a = c.attrs.as<RecurrenceAttrs>();
  const int64_t batch = c.in[2].shape[0], steps = c.in[2].shape[1], units = c.in[2].shape[2];
  const int64_t g = 3 * units;
  const T* xw = c.in[0].ptr<const T>();
  const T* r = c.in[1].ptr<const T>();
  const T* y = c.in[2].ptr<const T>();
  const T* hz = c.in[3].ptr<const T>();
  const T* gy = c.in[4].ptr<const T>();
  T* gxw = c.out[0].ptr<T>();
  T* gr = c.out[1].ptr<T>();
  T* gb = c.out[2].ptr<T>();
  T* ghz = c.out[3].ptr<T>();
  T* dh = c.out[4].ptr<T>();
  T* dd = dh + batch * units;
  std::memset(gr, 0, units * g * sizeof(T));
  std::memset(gb, 0, g * sizeof(T));
  if (batch * steps * units == 0) return;
  const StepProducts<T> product(c.state, r);
  for (int64_t s = steps - 1; s >= 0; --s) {
    const int64_t t = seq_step(s, steps, a.reverse), tp = seq_step(s - 1, steps, a.reverse),
                  tn = seq_step(s + 1, steps, a.reverse);
    // What the successor's recurrent projection sends back to h_t: dh = ghz_next R^T.
    if (tn >= 0 && product)
      product(ghz + tn * g, dh);
    else if (tn >= 0)
      cpu::gemm(false, true, batch, units, g, ghz + tn * g, steps * g, r, g, T(0), dh, units);
    const T* dh_rec = tn >= 0 ? dh : nullptr;
    step_cells(batch, units, a, [&](int64_t b, int64_t u, auto act, auto rec) {
      gru_sequence_backward_unit(xw, hz, y, gy, dh_rec, dd, gxw, ghz, b, u, t, tp, steps, units,
                                 act, rec);
    });
  }
  recurrent_kernel_grad(y, ghz, gr, batch, steps, units, g, a.reverse);
  for (int64_t row = 0; row < batch * steps; ++row)
    for (int64_t j = 0; j < g; ++j) gb[j] += ghz[row * g + j];
}

// The per-shape setup of the float32 kernels: their step products. Forward ops: h_prev (B, U),
// rows steps * U apart, @ R (U, gates * U) into the step's rows of the gate pre-activations.
// Backward ops: the next step's gate gradients (B, gates * U) @ R^T into dh (B, U).
template <int Gates, bool Backward> std::shared_ptr<void> prepare_steps(const KernelCtx& c) {
  // lstm_sequence_backward takes the recurrent kernel first, the others second.
  const bool r_first = Backward && Gates == 4;
  const TensorRef &r = c.in[r_first ? 0 : 1], &seq = c.in[r_first ? 1 : 0];
  const int64_t batch = seq.shape[0], steps = seq.shape[1], units = r.shape[0], g = Gates * units;
  if (r.dtype != DType::Float32 || batch * steps * units == 0) return nullptr;
  return Backward ? step_gemm(batch, g, units, steps * g, units, true, false)
                  : step_gemm(batch, units, g, steps * units, steps * g, false, true);
}

OpDef& lstm_sequence_op = define_op({
    .name = "lstm_sequence",
    .min_inputs = 2,
    .max_inputs = 2,
    .save = Save::Inputs | Save::Outputs,
    .contiguous_inputs = true,
    .attrs = &attrs_of<RecurrenceAttrs>,
    .infer = infer_lstm_sequence,
    .backward = bw_lstm_sequence,
    .cpu = {[](const KernelCtx& c) {
              visit_float(c.in[0].dtype, [&]<class T>() { lstm_sequence_cpu<T>(c); });
            },
            prepare_steps<4, false>},
    .signature = "lstm_sequence(xw: Tensor, recurrent_kernel: Tensor, activation: str = 'tanh', "
                 "recurrent_activation: str = 'sigmoid', reverse: bool = False) -> Tensor",
    .invoke = [](const CallArgs& a) -> Outputs {
      return {lstm_sequence(a.tensor(0), a.tensor(1), parse_activation(a.string(2)),
                            parse_activation(a.string(3)), a.boolean(4))};
    },
    .doc =
        "A whole LSTM sequence from a zero state: xw (batch, steps, 4*units) are the input "
        "projections x W + b in gate order i, f, c, o; returns the states h (batch, steps, units), "
        "aligned with the input steps also when `reverse` processes them last to first",
    .examples = {{.inputs = {{{2, 3, 8}}, {{2, 8}}},
                  .args = "reverse=True",
                  .parity_tolerance = 1e-4}},
});
OpDef& lstm_sequence_backward_row = define_op({
    .name = "lstm_sequence_backward",
    .min_inputs = 5,
    .max_inputs = 5,
    .contiguous_inputs = true,
    .attrs = &attrs_of<RecurrenceAttrs>,
    .infer = infer_lstm_sequence_backward,
    .cpu = {[](const KernelCtx& c) {
              visit_float(c.in[0].dtype, [&]<class T>() { lstm_sequence_backward_cpu<T>(c); });
            },
            prepare_steps<4, true>},
    .examples = {{.inputs = {{{2, 8}}, {{2, 3, 2}}, {{2, 3, 2}}, {{2, 3, 8}}, {{2, 3, 2}}},
                  .call = [](std::span<const Tensor> x) -> Outputs {
                    const OutList r =
                        dispatch(lstm_sequence_backward_op(), x,
                                 RecurrenceAttrs{Activation::Tanh, Activation::Sigmoid, false});
                    return {r[0], r[1]};
                  },
                  .parity_tolerance = 1e-4}},
});
const OpDef& lstm_sequence_backward_op() { return lstm_sequence_backward_row; }
OpDef& gru_sequence_op = define_op({
    .name = "gru_sequence",
    .min_inputs = 3,
    .max_inputs = 3,
    .save = Save::Inputs | Save::Outputs,
    .contiguous_inputs = true,
    .attrs = &attrs_of<RecurrenceAttrs>,
    .infer = infer_gru_sequence,
    .backward = bw_gru_sequence,
    .cpu = {[](const KernelCtx& c) {
              visit_float(c.in[0].dtype, [&]<class T>() { gru_sequence_cpu<T>(c); });
            },
            prepare_steps<3, false>},
    .signature = "gru_sequence(xw: Tensor, recurrent_kernel: Tensor, recurrent_bias: Tensor, "
                 "activation: str = 'tanh', "
                 "recurrent_activation: str = 'sigmoid', reverse: bool = False) -> Tensor",
    .invoke = [](const CallArgs& a) -> Outputs {
      return {gru_sequence(a.tensor(0), a.tensor(1), a.tensor(2), parse_activation(a.string(3)),
                           parse_activation(a.string(4)), a.boolean(5))};
    },
    .doc = "A whole GRU sequence (Keras reset_after=True) from a zero state: xw (batch, steps, "
           "3*units) "
           "are the input projections x W + b_input in gate order z, r, h; returns the states h "
           "(batch, "
           "steps, units), aligned with the input steps also when `reverse` processes them last to "
           "first",
    .examples = {{.inputs = {{{2, 3, 6}}, {{2, 6}}, {{6}}},
                  .args = "reverse=True",
                  .parity_tolerance = 1e-4}},
});
OpDef& gru_sequence_backward_row = define_op({
    .name = "gru_sequence_backward",
    .min_inputs = 5,
    .max_inputs = 5,
    .contiguous_inputs = true,
    .attrs = &attrs_of<RecurrenceAttrs>,
    .infer = infer_gru_sequence_backward,
    .cpu = {[](const KernelCtx& c) {
              visit_float(c.in[0].dtype, [&]<class T>() { gru_sequence_backward_cpu<T>(c); });
            },
            prepare_steps<3, true>},
    .examples = {{.inputs = {{{2, 3, 6}}, {{2, 6}}, {{2, 3, 2}}, {{2, 3, 6}}, {{2, 3, 2}}},
                  .call = [](std::span<const Tensor> x) -> Outputs {
                    const OutList r =
                        dispatch(gru_sequence_backward_op(), x,
                                 RecurrenceAttrs{Activation::Tanh, Activation::Sigmoid, false});
                    return {r[0], r[1], r[2]};
                  },
                  .parity_tolerance = 1e-4}},
});
const OpDef& gru_sequence_backward_op() { return gru_sequence_backward_row; }

}  // namespace

Tensor lstm_sequence(const Tensor& xw, const Tensor& recurrent_kernel, Activation activation,
                     Activation recurrent_activation, bool reverse) {
  const Tensor in[] = {xw, recurrent_kernel};
  return dispatch(lstm_sequence_op, in,
                  RecurrenceAttrs{activation, recurrent_activation, reverse})[0];
}

Tensor gru_sequence(const Tensor& xw, const Tensor& recurrent_kernel, const Tensor& recurrent_bias,
                    Activation activation, Activation recurrent_activation, bool reverse) {
  const Tensor in[] = {xw, recurrent_kernel, recurrent_bias};
  return dispatch(gru_sequence_op, in,
                  RecurrenceAttrs{activation, recurrent_activation, reverse})[0];
}

std::pair<Tensor, Tensor> fused_recurrence(const OpDef& op, const Tensor& x, const Tensor& kernel,
                                           const Tensor& recurrent_kernel, const Tensor& bias,
                                           Activation activation, Activation recurrent_activation) {
  ENCORE_CHECK(op.fused_cell != RecurrentCell::None, ValueError, "[", op.name,
               "] is not a fused recurrence");
  ENCORE_CHECK(
      x.dim() == 3 && recurrent_kernel.dim() == 2, ShapeError, "[", op.name,
      "] expects x (batch, steps, features) and a recurrent kernel (units, gates * units), got ",
      x.shape().str(), " and ", recurrent_kernel.shape().str());
  const Shape state{x.shape()[0], recurrent_kernel.shape()[0]};
  std::vector<Tensor> in = {x, zeros(state, x.dtype(), x.device())};
  if (op.fused_cell == RecurrentCell::Lstm)
    in.push_back(zeros(state, x.dtype(), x.device()));  // c0
  in.insert(in.end(), {kernel, recurrent_kernel, bias});
  const OutList out = dispatch(op, in, LstmAttrs{activation, recurrent_activation});
  return {out[0], out[1]};
}

}  // namespace encore
