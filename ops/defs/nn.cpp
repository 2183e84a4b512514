// Neural-network building blocks: softmax and log_softmax over an axis, dropout (its mask from
// the generator's counter-based stream), gather/scatter along the last axis (sparse
// cross-entropy) and the fused LSTM cell with its backward: rows, shape inference, backward
// formulas, CPU kernels and public functions.
#include <cstring>

#include "core/modes.h"
#include "ops/defs/common.h"
#include "ops/functors.h"
#include "ops/lstm_math.h"
#include "ops/nn.h"
#include "ops/philox.h"
#include "ops/random.h"

namespace encore {
namespace {

const OpDef& lstm_cell_backward_op();

int infer_softmax(const OpDef& op, std::span<const Tensor> in, const Attrs& a, TensorMeta* out) {
  defs::require_float(op.name, in[0]);
  const int axis = a.as<AxisAttrs>().axis;
  ENCORE_CHECK(axis >= 0 && axis < in[0].dim(), ShapeError, "[", op.name, "] axis ", axis,
               " out of range for ", describe(in[0]));
  out[0] = defs::meta_like(in[0]);
  return 1;
}
void bw_softmax(const BackwardCtx& c, Tensor* g) {
  const int axis = c.attrs.as<AxisAttrs>().axis;
  const Tensor& y = c.outputs[0];
  g[0] = y * (c.grads[0] - sum(c.grads[0] * y, {axis}, true));
}
void bw_log_softmax(const BackwardCtx& c, Tensor* g) {
  const int axis = c.attrs.as<AxisAttrs>().axis;
  g[0] = c.grads[0] - exp(c.outputs[0]) * sum(c.grads[0], {axis}, true);
}

// dropout(x, generator_state) -> (y, mask); mask holds 0 or 1/(1-p).
int infer_dropout(const OpDef&, std::span<const Tensor> in, const Attrs& a, TensorMeta* out) {
  defs::require_float("dropout", in[0]);
  const double p = a.as<DropoutAttrs>().p;
  ENCORE_CHECK(p >= 0.0 && p < 1.0, ValueError, "[dropout] rate must be in [0, 1), got ", p);
  ENCORE_CHECK(in[1].dtype() == DType::Int64 && in[1].numel() == 2, DTypeError,
               "[dropout] second input must be a generator state, got ", describe(in[1]));
  out[0] = out[1] = defs::meta_like(in[0]);
  return 2;
}
void bw_dropout(const BackwardCtx& c, Tensor* g) {
  if (c.grads[0].defined()) g[0] = c.grads[0] * c.outputs[1];
}

void check_index(const char* op, const Tensor& index) {
  ENCORE_CHECK(index.dtype() == DType::Int32 || index.dtype() == DType::Int64, DTypeError, "[", op,
               "] indices must be int32 or int64, got ", describe(index));
}

// gather_last(x (..., n), index (...)) -> (...)
int infer_gather_last(const OpDef&, std::span<const Tensor> in, const Attrs&, TensorMeta* out) {
  const Tensor &x = in[0], &index = in[1];
  check_index("gather_last", index);
  Shape rows(std::span<const int64_t>(x.shape().begin(), std::max(x.dim() - 1, 0)));
  ENCORE_CHECK(x.dim() >= 1 && index.shape() == rows, ShapeError, "[gather_last] indices ",
               index.shape().str(), " must have the shape of ", x.shape().str(),
               " without its last axis");
  // Every index is out of range then (the CUDA kernel would not even look at them).
  ENCORE_CHECK(x.shape().back() > 0 || index.numel() == 0, ValueError,
               "[gather_last] cannot pick entries from the empty last axis of ", x.shape().str());
  out[0] = defs::meta(rows, x.dtype(), x.device());
  return 1;
}
void bw_gather_last(const BackwardCtx& c, Tensor* g) {
  g[0] = scatter_last(c.grads[0], c.inputs[1], c.input_shape(0).back());
}

// scatter_last(g (...), index (...); n) -> (..., n)
int infer_scatter_last(const OpDef&, std::span<const Tensor> in, const Attrs& a, TensorMeta* out) {
  check_index("scatter_last", in[1]);
  ENCORE_CHECK(in[0].shape() == in[1].shape(), ShapeError, "[scatter_last] values ",
               in[0].shape().str(), " and indices ", in[1].shape().str(), " differ in shape");
  Shape s = in[0].shape();
  s.push_back(a.as<ScatterAttrs>().n);
  out[0] = defs::meta(s, in[0].dtype(), in[0].device());
  return 1;
}
void bw_scatter_last(const BackwardCtx& c, Tensor* g) {
  g[0] = gather_last(c.grads[0], c.inputs[1]);
}

// lstm_cell(z (B, 4U), c_prev (B, U)) -> (h, c)
int infer_lstm_cell(const OpDef&, std::span<const Tensor> in, const Attrs&, TensorMeta* out) {
  const Tensor &z = in[0], &c = in[1];
  defs::require_float("lstm_cell", z);
  defs::require_same_dtype("lstm_cell", z, c);
  ENCORE_CHECK(z.dim() == 2 && c.dim() == 2 && z.shape()[0] == c.shape()[0] &&
                   z.shape()[1] == 4 * c.shape()[1],
               ShapeError, "[lstm_cell] gates ", z.shape().str(),
               " must be (batch, 4 * units) for state ", c.shape().str());
  out[0] = out[1] = defs::meta_like(c);
  return 2;
}
void bw_lstm_cell(const BackwardCtx& c, Tensor* g) {
  const Tensor& state = c.outputs[1];
  auto grad = [&](int i) { return c.grads[i].defined() ? c.grads[i] : zeros_like(state); };
  const Tensor in[] = {c.inputs[0], c.inputs[1], state, grad(0), grad(1)};
  const OutList r = dispatch(lstm_cell_backward_op(), in, c.attrs);
  g[0] = r[0];
  g[1] = r[1];
}

// lstm_cell_backward(z, c_prev, c, grad_h, grad_c) -> (grad_z, grad_c_prev)
int infer_lstm_cell_backward(const OpDef&, std::span<const Tensor> in, const Attrs&,
                             TensorMeta* out) {
  for (int i = 2; i < 5; ++i)
    ENCORE_CHECK(in[i].shape() == in[1].shape() && in[i].dtype() == in[1].dtype(), ShapeError,
                 "[lstm_cell_backward] input ", i, " ", describe(in[i]),
                 " does not match the state ", describe(in[1]));
  out[0] = defs::meta_like(in[0]);
  out[1] = defs::meta_like(in[1]);
  return 2;
}

// A contiguous tensor seen as (outer, n, inner) around `axis`.
struct AxisSplit {
  int64_t outer = 1, n = 1, inner = 1;
  AxisSplit(const Shape& s, int axis) {
    for (int i = 0; i < s.size(); ++i) (i < axis ? outer : i == axis ? n : inner) *= s[i];
  }
};

template <class T, bool Log> void softmax(const TensorRef& x, const TensorRef& y, int axis) {
  const AxisSplit s(x.shape, axis);
  if (s.n == 0) return;  // an empty axis: the output is empty too
  const T* in = x.ptr<const T>();
  T* out = y.ptr<T>();
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t j = 0; j < s.inner; ++j) {
      const T* a = in + o * s.n * s.inner + j;
      T* b = out + o * s.n * s.inner + j;
      T m = a[0];
      for (int64_t i = 1; i < s.n; ++i) m = fn::m_max(m, a[i * s.inner]);
      fn::SoftmaxSum<T> sum;
      for (int64_t i = 0; i < s.n; ++i) sum.add(a[i * s.inner], m);
      const T log_total = Log ? sum.log_total() : T(0);
      for (int64_t i = 0; i < s.n; ++i)
        b[i * s.inner] = fn::softmax_value<T, Log>(a[i * s.inner], m, sum, log_total);
    }
}

template <bool Log> void softmax_kernel(const KernelCtx& c) {
  const int axis = c.attrs.as<AxisAttrs>().axis;
  visit_float(c.in[0].dtype, [&]<class T>() { softmax<T, Log>(c.in[0], c.out[0], axis); });
}

void dropout_kernel(const KernelCtx& c) {
  const double p = c.attrs.as<DropoutAttrs>().p;
  int64_t* state = c.in[1].ptr<int64_t>();
  const uint64_t seed = static_cast<uint64_t>(state[0]), offset = static_cast<uint64_t>(state[1]);
  const int64_t n = c.in[0].numel();
  visit_float(c.in[0].dtype, [&]<class T>() {
    const T* x = c.in[0].ptr<const T>();
    T* y = c.out[0].ptr<T>();
    T* mask = c.out[1].ptr<T>();
    const T scale = T(1.0 / (1.0 - p));
    const float keep_above = static_cast<float>(p);
    for (int64_t b = 0; b < static_cast<int64_t>(philox_blocks(n)); ++b) {
      const Philox4 r = philox(seed, offset + b);
      for (int l = 0; l < 4 && b * 4 + l < n; ++l) {
        const int64_t i = b * 4 + l;
        mask[i] = uniform01(r.v[l]) >= keep_above ? scale : T(0);
        y[i] = x[i] * mask[i];
      }
    }
  });
  state[1] = static_cast<int64_t>(offset + philox_blocks(n));
}

template <class T, class I>
void gather_last_cpu(const TensorRef& x, const TensorRef& idx, const TensorRef& y) {
  const int64_t rows = y.numel(), n = x.shape.back();
  const T* in = x.ptr<const T>();
  const I* ix = idx.ptr<const I>();
  T* out = y.ptr<T>();
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t k = ix[r];
    ENCORE_CHECK(k >= 0 && k < n, ValueError, "[gather_last] index ", k,
                 " is out of range for an axis of size ", n);
    out[r] = in[r * n + k];
  }
}

template <class T, class I>
void scatter_last_cpu(const TensorRef& g, const TensorRef& idx, const TensorRef& y) {
  const int64_t rows = g.numel(), n = y.shape.back();
  const T* in = g.ptr<const T>();
  const I* ix = idx.ptr<const I>();
  T* out = y.ptr<T>();
  std::memset(out, 0, rows * n * sizeof(T));
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t k = ix[r];
    ENCORE_CHECK(k >= 0 && k < n, ValueError, "[scatter_last] index ", k,
                 " is out of range for an axis of size ", n);
    out[r * n + k] = in[r];
  }
}

template <bool Gather> void gather_scatter_kernel(const KernelCtx& c) {
  visit_dtype(c.in[0].dtype, [&]<class T>() {
    auto run = [&]<class I>() {
      if constexpr (Gather)
        gather_last_cpu<T, I>(c.in[0], c.in[1], c.out[0]);
      else
        scatter_last_cpu<T, I>(c.in[0], c.in[1], c.out[0]);
    };
    if (c.in[1].dtype == DType::Int32)
      run.template operator()<int32_t>();
    else
      run.template operator()<int64_t>();
  });
}

template <class T> void lstm_cell_cpu(const KernelCtx& c) {
  const auto& a = c.attrs.as<LstmAttrs>();
  const int64_t batch = c.in[1].shape[0], units = c.in[1].shape[1];
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t u = 0; u < units; ++u)
      lstm_cell_unit(c.in[0].ptr<const T>(), c.in[1].ptr<const T>(), c.out[0].ptr<T>(),
                     c.out[1].ptr<T>(), b, u, units, a.activation, a.recurrent_activation);
}

template <class T> void lstm_cell_backward_cpu(const KernelCtx& c) {
  const auto& a = c.attrs.as<LstmAttrs>();
  const int64_t batch = c.in[1].shape[0], units = c.in[1].shape[1];
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t u = 0; u < units; ++u)
      lstm_cell_backward_unit(c.in[0].ptr<const T>(), c.in[1].ptr<const T>(),
                              c.in[2].ptr<const T>(), c.in[3].ptr<const T>(),
                              c.in[4].ptr<const T>(), c.out[0].ptr<T>(), c.out[1].ptr<T>(), b, u,
                              units, a.activation, a.recurrent_activation);
}

Outputs one(const Tensor& t) { return {t}; }

OpDef& softmax_op = define_op({
    .name = "softmax",
    .save = Save::Outputs,
    .contiguous_inputs = true,
    .attrs = &attrs_of<AxisAttrs>,
    .infer = infer_softmax,
    .backward = bw_softmax,
    .cpu = {softmax_kernel<false>},
    .signature = "softmax(x: Tensor, axis: int = -1) -> Tensor",
    .invoke = [](const CallArgs& a) { return one(softmax(a.tensor(0), a.integer(1))); },
    .method = true,
    .examples = {{.inputs = {{{3, 5}}}, .args = "axis=0"},
                 {.inputs = {{{2, 3, 4}}}, .args = "axis=1"},  // a middle axis
                 {.inputs = {{{3, 1}}}}},                      // one entry
});
OpDef& log_softmax_op = define_op({
    .name = "log_softmax",
    .save = Save::Outputs,
    .contiguous_inputs = true,
    .attrs = &attrs_of<AxisAttrs>,
    .infer = infer_softmax,
    .backward = bw_log_softmax,
    .cpu = {softmax_kernel<true>},
    .signature = "log_softmax(x: Tensor, axis: int = -1) -> Tensor",
    .invoke = [](const CallArgs& a) { return one(log_softmax(a.tensor(0), a.integer(1))); },
    .method = true,
    .examples = {{.inputs = {{{3, 5}}}}, {.inputs = {{{2, 3, 4}}}, .args = "axis=0"}},
});
// dropout(x, generator state) -> (y, mask): the mask holds 0 or 1/(1-p). The generator state is
// written (advanced) and gets no gradient.
OpDef& dropout_op = define_op({
    .name = "dropout",
    .min_inputs = 2,
    .max_inputs = 2,
    .mutates = 0b10,
    .nondiff = 0b10,
    .save = Save::Outputs,
    .contiguous_inputs = true,
    .attrs = &attrs_of<DropoutAttrs>,
    .infer = infer_dropout,
    .backward = bw_dropout,
    .cpu = {dropout_kernel},
    .signature = "dropout(x: Tensor, p: float, training: bool | None = None, generator: Generator "
                 "| None = None) "
                 "-> Tensor",
    .invoke = [](const CallArgs& a) -> Outputs {
      return {dropout(a.tensor(0), a.real(1),
                      a.is_none(2) ? std::nullopt : std::optional(a.boolean(2)), a.generator(3))};
    },
    .doc = "Inverted dropout; `training` defaults to encore's training mode",
    .examples = {{.inputs = {{{4, 6}}}, .args = "p=0.5, training=True"}},
});
OpDef& gather_last_op = define_op({
    .name = "gather_last",
    .min_inputs = 2,
    .max_inputs = 2,
    .nondiff = 0b10,
    .save = Save::Inputs,
    .contiguous_inputs = true,
    .infer = infer_gather_last,
    .backward = bw_gather_last,
    .cpu = {gather_scatter_kernel<true>},
    .signature = "gather_last(x: Tensor, index: Tensor) -> Tensor",
    .invoke = [](const CallArgs& a) { return one(gather_last(a.tensor(0), a.tensor(1))); },
    .examples = {{.inputs = {{{3, 5}}, {{3}, ExampleInput::Index, 5}}}},
});
OpDef& scatter_last_op = define_op({
    .name = "scatter_last",
    .min_inputs = 2,
    .max_inputs = 2,
    .nondiff = 0b10,
    .save = Save::Inputs,
    .contiguous_inputs = true,
    .attrs = &attrs_of<ScatterAttrs>,
    .infer = infer_scatter_last,
    .backward = bw_scatter_last,
    .cpu = {gather_scatter_kernel<false>},
    .signature = "scatter_last(g: Tensor, index: Tensor, n: int) -> Tensor",
    .invoke =
        [](const CallArgs& a) { return one(scatter_last(a.tensor(0), a.tensor(1), a.integer(2))); },
    .examples = {{.inputs = {{{3}}, {{3}, ExampleInput::Index, 5}}, .args = "n=5"}},
});
// lstm_cell(z (B, 4U), c_prev (B, U)) -> (h, c)
OpDef& lstm_cell_op = define_op({
    .name = "lstm_cell",
    .min_inputs = 2,
    .max_inputs = 2,
    .save = Save::Inputs | Save::Outputs,
    .contiguous_inputs = true,
    .attrs = &attrs_of<LstmAttrs>,
    .infer = infer_lstm_cell,
    .backward = bw_lstm_cell,
    .cpu = {[](const KernelCtx& c) {
      visit_float(c.in[0].dtype, [&]<class T>() { lstm_cell_cpu<T>(c); });
    }},
    .signature = "lstm_cell(z: Tensor, c_prev: Tensor, activation: str = 'tanh', "
                 "recurrent_activation: str = 'sigmoid') "
                 "-> tuple[Tensor, Tensor]",
    .invoke = [](const CallArgs& a) -> Outputs {
      const auto [h, c] = lstm_cell(a.tensor(0), a.tensor(1), parse_activation(a.string(2)),
                                    parse_activation(a.string(3)));
      return {h, c};
    },
    .doc = "One fused LSTM step on pre-activations z (batch, 4*units) in gate order i, f, c, o: "
           "returns (h, c)",
    .examples = {{.inputs = {{{2, 12}}, {{2, 3}}}}},
});
// lstm_cell_backward(z, c_prev, c, grad_h, grad_c) -> (grad_z, grad_c_prev)
OpDef& lstm_cell_backward_row = define_op({
    .name = "lstm_cell_backward",
    .min_inputs = 5,
    .max_inputs = 5,
    .contiguous_inputs = true,
    .attrs = &attrs_of<LstmAttrs>,
    .infer = infer_lstm_cell_backward,
    .cpu = {[](const KernelCtx& c) {
      visit_float(c.in[0].dtype, [&]<class T>() { lstm_cell_backward_cpu<T>(c); });
    }},
    .examples = {{.inputs = {{{2, 12}}, {{2, 3}}, {{2, 3}}, {{2, 3}}, {{2, 3}}},
                  .call = [](std::span<const Tensor> x) -> Outputs {
                    const std::vector<Tensor> in(x.begin(), x.end());
                    const OutList r = dispatch(lstm_cell_backward_op(), in,
                                               LstmAttrs{Activation::Tanh, Activation::Sigmoid});
                    return {r[0], r[1]};
                  }}},
});
const OpDef& lstm_cell_backward_op() { return lstm_cell_backward_row; }

}  // namespace

Tensor softmax(const Tensor& x, int64_t axis) {
  return call(softmax_op, {x}, AxisAttrs{normalize_axis(axis, x.dim(), "softmax")});
}

Tensor log_softmax(const Tensor& x, int64_t axis) {
  return call(log_softmax_op, {x}, AxisAttrs{normalize_axis(axis, x.dim(), "log_softmax")});
}

Tensor dropout(const Tensor& x, double p, std::optional<bool> training, Generator* generator) {
  ENCORE_CHECK(p >= 0.0 && p < 1.0, ValueError, "[dropout] rate must be in [0, 1), got ", p);
  if (!training.value_or(encore::training()) || p == 0.0) return x;
  const Tensor in[] = {x, generator_for(generator, x.device(), "dropout").state()};
  return dispatch(dropout_op, in, DropoutAttrs{p})[0];
}

Tensor gather_last(const Tensor& x, const Tensor& index) {
  return call(gather_last_op, {x, index});
}

Tensor scatter_last(const Tensor& g, const Tensor& index, int64_t n) {
  ENCORE_CHECK(n >= 1, ValueError, "[scatter_last] axis size must be >= 1, got ", n);
  return call(scatter_last_op, {g, index}, ScatterAttrs{n});
}

std::pair<Tensor, Tensor> lstm_cell(const Tensor& z, const Tensor& c_prev, Activation activation,
                                    Activation recurrent_activation) {
  require_elementwise(activation, "lstm_cell");
  require_elementwise(recurrent_activation, "lstm_cell");
  const Tensor in[] = {z, c_prev};
  const OutList r = dispatch(lstm_cell_op, in, LstmAttrs{activation, recurrent_activation});
  return {r[0], r[1]};
}

}  // namespace encore
