// Elementwise ops (one input, or two with NumPy broadcasting): their rows, shape inference,
// backward formulas, CPU kernels (contiguous fast paths, else strided loops) and public
// functions. The math is the functors of ops/functors.h, shared with the CUDA kernels.
// Long: one table of some forty rows built by the same few row makers, which a split would have
// to export.
#include "ops/elementwise.h"
#include "ops/cpu/loops.h"
#include "ops/defs/common.h"
#include "ops/epilogue.h"
#include "ops/sigmoid_origin.h"

namespace encore {
namespace {

using cpu::broadcast_strides;
using cpu::StridedLoop;

// An integer tensor must be able to hold the op's scalars exactly (see Scalar::check_operand).
void check_scalars(const char* op, const Attrs& attrs, DType dtype) {
  if (attrs.type() == &attrs_of<ScalarAttrs>) {
    attrs.as<ScalarAttrs>().value.check_operand(dtype, op);
  } else if (attrs.type() == &attrs_of<ClipAttrs>) {
    attrs.as<ClipAttrs>().lo.check_operand(dtype, op);
    attrs.as<ClipAttrs>().hi.check_operand(dtype, op);
  }
}

// The 0-d operand, in `like`'s dtype, of an op with no scalar form (comparisons, division).
Tensor operand(const Tensor& like, Scalar v, const char* op) {
  v.check_operand(like.dtype(), op);
  return full({}, v, like.dtype(), like.device());
}

template <DTypeClass C>
int infer_unary(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs, TensorMeta* out) {
  if constexpr (C == DTypeClass::Float)
    defs::require_float(op.name, in[0]);
  else
    check_scalars(op.name, attrs, in[0].dtype());
  out[0] = defs::meta_like(in[0]);
  return 1;
}

int infer_binary(const OpDef& op, std::span<const Tensor> in, const Attrs&, TensorMeta* out) {
  defs::require_same_dtype(op.name, in[0], in[1]);
  out[0] = defs::meta(broadcast_shapes(in[0].shape(), in[1].shape(), op.name), in[0].dtype(),
                      in[0].device());
  return 1;
}

int infer_float_binary(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs,
                       TensorMeta* out) {
  defs::require_float(op.name, in[0]);
  return infer_binary(op, in, attrs, out);
}

int infer_activation_grad(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs,
                          TensorMeta* out) {
  const Activation a = attrs.as<ActivationAttrs>().activation;
  ENCORE_CHECK(fusable_activation(a), ValueError, "[", op.name,
               "] has no gradient from the output of activation '", name(a), "'");
  return infer_float_binary(op, in, attrs, out);
}

template <class F, class T> void unary(const TensorRef& x, const TensorRef& y, F f) {
  T* out = y.ptr<T>();
  const T* in = x.ptr<const T>();
  if (x.contiguous()) {
    const int64_t n = y.numel();
    for (int64_t i = 0; i < n; ++i) out[i] = f(in[i]);
    return;
  }
  StridedLoop<2>(y.shape, {y.strides, x.strides}).run([&](auto off, auto st, int64_t n) {
    T* __restrict o = out + off[0];
    const T* __restrict a = in + off[1];
    if (st[0] == 1 && st[1] == 1) {
      for (int64_t i = 0; i < n; ++i) o[i] = f(a[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) o[i * st[0]] = f(a[i * st[1]]);
    }
  });
}

// True when `b` (ignoring leading 1s) equals the trailing dims of `shape`.
inline bool trailing_match(const Shape& b, const Shape& shape) {
  int lead = 0;
  while (lead < b.size() && b[lead] == 1) ++lead;
  const int k = b.size() - lead;
  if (k > shape.size()) return false;
  for (int i = 0; i < k; ++i)
    if (b[lead + i] != shape[shape.size() - k + i]) return false;
  return true;
}

template <class F, class T>
void binary(const TensorRef& a, const TensorRef& b, const TensorRef& y, F f) {
  T* out = y.ptr<T>();
  const T* pa = a.ptr<const T>();
  const T* pb = b.ptr<const T>();
  const int64_t n = y.numel();
  if (a.contiguous() && b.contiguous()) {
    if (a.numel() == n && b.numel() == n) {
      for (int64_t i = 0; i < n; ++i) out[i] = f(pa[i], pb[i]);
      return;
    }
    if (b.numel() == 1 && a.numel() == n) {
      const T s = pb[0];
      for (int64_t i = 0; i < n; ++i) out[i] = f(pa[i], s);
      return;
    }
    if (a.numel() == 1 && b.numel() == n) {
      const T s = pa[0];
      for (int64_t i = 0; i < n; ++i) out[i] = f(s, pb[i]);
      return;
    }
    // A row vector broadcast over leading dims (a bias): b's shape is a's trailing shape.
    const int64_t m = b.numel();
    if (a.numel() == n && m > 0 && n % m == 0 && trailing_match(b.shape, y.shape)) {
      for (int64_t r = 0; r < n; r += m) {
        T* __restrict o = out + r;
        const T* __restrict x = pa + r;
        for (int64_t i = 0; i < m; ++i) o[i] = f(x[i], pb[i]);
      }
      return;
    }
  }
  StridedLoop<3>(y.shape, {y.strides, broadcast_strides(a, y.shape), broadcast_strides(b, y.shape)})
      .run([&](auto off, auto st, int64_t m) {
        // Unit-stride and broadcast inner runs get loops the compiler can vectorize.
        T* __restrict o = out + off[0];
        const T* __restrict x0 = pa + off[1];
        const T* __restrict x1 = pb + off[2];
        if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
          for (int64_t i = 0; i < m; ++i) o[i] = f(x0[i], x1[i]);
        } else if (st[0] == 1 && st[1] == 1 && st[2] == 0) {
          const T s = *x1;
          for (int64_t i = 0; i < m; ++i) o[i] = f(x0[i], s);
        } else if (st[0] == 1 && st[1] == 0 && st[2] == 1) {
          const T s = *x0;
          for (int64_t i = 0; i < m; ++i) o[i] = f(s, x1[i]);
        } else {
          for (int64_t i = 0; i < m; ++i) o[i * st[0]] = f(x0[i * st[1]], x1[i * st[2]]);
        }
      });
}

template <class F, DTypeClass C> void unary_kernel(const KernelCtx& c) {
  const F f = make_functor<F>(c.attrs);
  if constexpr (C == DTypeClass::Float)
    visit_float(c.in[0].dtype, [&]<class T>() { unary<F, T>(c.in[0], c.out[0], f); });
  else
    visit_dtype(c.in[0].dtype, [&]<class T>() { unary<F, T>(c.in[0], c.out[0], f); });
}

template <class F, DTypeClass C = DTypeClass::Numeric> void binary_kernel(const KernelCtx& c) {
  const auto run = [&]<class T>() { binary<F, T>(c.in[0], c.in[1], c.out[0], F{}); };
  if constexpr (C == DTypeClass::Float)
    visit_float(c.in[0].dtype, run);
  else
    visit_dtype(c.in[0].dtype, run);
}

void activation_grad_kernel(const KernelCtx& c) {
  with_activation_grad(c.attrs.as<ActivationAttrs>().activation, c.op,
                       [&]<class F>(F) { binary_kernel<F, DTypeClass::Float>(c); });
}

const Scalar& scalar(const Attrs& a) { return a.as<ScalarAttrs>().value; }

// The CPU kernel and shape inference of an op of kElementwiseOps (ops/elementwise.h), by name;
// null for a name the list lacks (the op table then reports a row without a kernel).
struct ElementwiseParts {
  KernelFn kernel = nullptr;
  InferFn infer = nullptr;
};
ElementwiseParts elementwise(std::string_view name) {
  ElementwiseParts parts;
  for_each_elementwise_op([&](const auto& op) {
    using Op = std::decay_t<decltype(op)>;
    if (op.name != name) return;
    if constexpr (Op::arity == 1)
      parts = {unary_kernel<typename Op::Functor, Op::dtypes>, infer_unary<Op::dtypes>};
    else
      parts = {binary_kernel<typename Op::Functor, Op::dtypes>,
               Op::dtypes == DTypeClass::Float ? infer_float_binary : infer_binary};
  });
  return parts;
}

// Rows of one-input ops.
OpDef unary(const char* name, BackwardFn backward, Save save, const char* signature,
            InvokeFn invoke, ExampleInput::Values values, const AttrType* attrs = nullptr,
            Example example = {}) {
  const ElementwiseParts parts = elementwise(name);
  // `example`'s call on a matrix, a 0-d tensor and an empty one.
  std::vector<Example> examples;
  for (const Shape& shape : {Shape{3, 4}, Shape{}, Shape{2, 0}}) {
    examples.push_back(example);
    examples.back().inputs = {{shape, values}};
  }
  return {.name = name,
          .save = save,
          .attrs = attrs,
          .infer = parts.infer,
          .backward = backward,
          .cpu = {parts.kernel},
          .signature = signature,
          .invoke = invoke,
          .method = signature != nullptr,
          .examples = std::move(examples)};
}

// Rows of two-input ops; the examples broadcast a row over a matrix, both operands over each
// other, and an empty operand.
OpDef binary(const char* name, BackwardFn backward, Save save, const char* signature,
             InvokeFn invoke, ExampleInput::Values values) {
  const ElementwiseParts parts = elementwise(name);
  return {.name = name,
          .min_inputs = 2,
          .max_inputs = 2,
          .save = save,
          .infer = parts.infer,
          .backward = backward,
          .cpu = {parts.kernel},
          .signature = signature,
          .invoke = invoke,
          .examples = {{.inputs = {{{3, 4}, values}, {{4}, values}}},
                       {.inputs = {{{2, 1, 4}, values}, {{2, 1}, values}}},
                       {.inputs = {{{0, 4}, values}, {{1, 4}, values}}}}};
}

template <Tensor (*F)(const Tensor&)> Outputs invoke1(const CallArgs& a) {
  return {F(a.tensor(0))};
}

// The two-input public functions take a tensor or a number as their second operand.
template <Tensor (*F)(const Tensor&, const Tensor&), Tensor (*S)(const Tensor&, Scalar)>
Outputs invoke2(const CallArgs& a) {
  const auto [t, s] = a.operand(1);
  return {t.defined() ? F(a.tensor(0), t) : S(a.tensor(0), s)};
}

// d/dx of two-input ops, reduced to each input's shape (broadcasting sums).
void bw_add(const BackwardCtx& c, Tensor* g) {
  if (c.need(0)) g[0] = sum_to(c.grads[0], c.input_shape(0));
  if (c.need(1)) g[1] = sum_to(c.grads[0], c.input_shape(1));
}
void bw_sub(const BackwardCtx& c, Tensor* g) {
  if (c.need(0)) g[0] = sum_to(c.grads[0], c.input_shape(0));
  if (c.need(1)) g[1] = sum_to(neg(c.grads[0]), c.input_shape(1));
}
void bw_mul(const BackwardCtx& c, Tensor* g) {
  if (c.need(0)) g[0] = sum_to(c.grads[0] * c.inputs[1], c.input_shape(0));
  if (c.need(1)) g[1] = sum_to(c.grads[0] * c.inputs[0], c.input_shape(1));
}
void bw_div(const BackwardCtx& c, Tensor* g) {
  if (c.need(0)) g[0] = sum_to(c.grads[0] / c.inputs[1], c.input_shape(0));
  if (c.need(1)) g[1] = sum_to(neg(c.grads[0]) * c.outputs[0] / c.inputs[1], c.input_shape(1));
}
// Ties send the whole gradient to the first input.
void bw_maximum(const BackwardCtx& c, Tensor* g) {
  if (c.need(0)) g[0] = sum_to(c.grads[0] * ge(c.inputs[0], c.inputs[1]), c.input_shape(0));
  if (c.need(1)) g[1] = sum_to(c.grads[0] * lt(c.inputs[0], c.inputs[1]), c.input_shape(1));
}
void bw_minimum(const BackwardCtx& c, Tensor* g) {
  if (c.need(0)) g[0] = sum_to(c.grads[0] * le(c.inputs[0], c.inputs[1]), c.input_shape(0));
  if (c.need(1)) g[1] = sum_to(c.grads[0] * gt(c.inputs[0], c.inputs[1]), c.input_shape(1));
}

using enum DTypeClass;
using enum ExampleInput::Values;

// ---- one input -------------------------------------------------------------------------
OpDef& neg_op = define_op(unary(
    "neg", [](const BackwardCtx& c, Tensor* g) { g[0] = neg(c.grads[0]); }, Save::None,
    "neg(x: Tensor) -> Tensor", invoke1<neg>, Uniform));
OpDef& exp_op = define_op(unary(
    "exp", [](const BackwardCtx& c, Tensor* g) { g[0] = c.grads[0] * c.outputs[0]; }, Save::Outputs,
    "exp(x: Tensor) -> Tensor", invoke1<exp>, Uniform));
OpDef& log_op = define_op(unary(
    "log", [](const BackwardCtx& c, Tensor* g) { g[0] = c.grads[0] / c.inputs[0]; }, Save::Inputs,
    "log(x: Tensor) -> Tensor", invoke1<log>, Positive));
OpDef& sqrt_op = define_op(unary(
    "sqrt", [](const BackwardCtx& c, Tensor* g) { g[0] = c.grads[0] / (c.outputs[0] * 2.0); },
    Save::Outputs, "sqrt(x: Tensor) -> Tensor", invoke1<sqrt>, Positive));
OpDef& erf_op = define_op(unary(
    "erf",
    [](const BackwardCtx& c, Tensor* g) {
      const Tensor& x = c.inputs[0];
      g[0] = c.grads[0] * (exp(neg(x * x)) * 1.12837916709551257390);  // 2 / sqrt(pi)
    },
    Save::Inputs, "erf(x: Tensor) -> Tensor", invoke1<erf>, Uniform));
OpDef& tanh_op = define_op(unary(
    "tanh",
    [](const BackwardCtx& c, Tensor* g) {
      g[0] = activation_backward(Activation::Tanh, c.grads[0], c.outputs[0]);
    },
    Save::Outputs, "tanh(x: Tensor) -> Tensor", invoke1<tanh>, Uniform));
OpDef& sigmoid_op = define_op(unary(
    "sigmoid",
    [](const BackwardCtx& c, Tensor* g) {
      g[0] = activation_backward(Activation::Sigmoid, c.grads[0], c.outputs[0]);
    },
    Save::Outputs, "sigmoid(x: Tensor) -> Tensor", invoke1<sigmoid>, Uniform));
OpDef& relu_op = define_op(unary(
    "relu",
    // The input has the output's sign: the saved input serves activation_grad as the output would.
    [](const BackwardCtx& c, Tensor* g) {
      g[0] = activation_backward(Activation::Relu, c.grads[0], c.inputs[0]);
    },
    Save::Inputs, "relu(x: Tensor) -> Tensor", invoke1<relu>, Uniform));
OpDef& abs_op = define_op(unary(
    "abs",
    [](const BackwardCtx& c, Tensor* g) {
      g[0] = c.grads[0] * (gt(c.inputs[0], 0) - lt(c.inputs[0], 0));
    },
    Save::Inputs, "abs(x: Tensor) -> Tensor", invoke1<abs>, Uniform));
OpDef& softplus_op = define_op(unary(
    "softplus", [](const BackwardCtx& c, Tensor* g) { g[0] = c.grads[0] * sigmoid(c.inputs[0]); },
    Save::Inputs, "softplus(x: Tensor) -> Tensor", invoke1<softplus>, Uniform));
OpDef& leaky_relu_op = define_op(unary(
    "leaky_relu",
    [](const BackwardCtx& c, Tensor* g) {
      const double alpha = scalar(c.attrs).d;
      g[0] = c.grads[0] * (gt(c.inputs[0], 0) * (1.0 - alpha) + alpha);
    },
    Save::Inputs, "leaky_relu(x: Tensor, alpha: float = 0.3) -> Tensor",
    [](const CallArgs& a) -> Outputs { return {leaky_relu(a.tensor(0), a.real(1))}; }, Uniform,
    &attrs_of<ScalarAttrs>, {.args = "alpha=0.2"}));
OpDef& pow_scalar_op = define_op(
    unary("pow_scalar",
          [](const BackwardCtx& c, Tensor* g) {
            const double p = scalar(c.attrs).d;
            g[0] = c.grads[0] * (pow(c.inputs[0], p - 1.0) * p);
          },
          Save::Inputs, nullptr, nullptr, Positive, &attrs_of<ScalarAttrs>,
          {.call = [](std::span<const Tensor> x) -> Outputs { return {pow(x[0], 2.5)}; }}));
OpDef& add_scalar_op =
    define_op(unary("add_scalar", [](const BackwardCtx& c, Tensor* g) { g[0] = c.grads[0]; },
                    Save::None, nullptr, nullptr, Uniform, &attrs_of<ScalarAttrs>,
                    {.call = [](std::span<const Tensor> x) -> Outputs { return {x[0] + 2.0}; }}));
OpDef& mul_scalar_op = define_op(unary(
    "mul_scalar", [](const BackwardCtx& c, Tensor* g) { g[0] = c.grads[0] * scalar(c.attrs); },
    Save::None, nullptr, nullptr, Uniform, &attrs_of<ScalarAttrs>,
    {.call = [](std::span<const Tensor> x) -> Outputs { return {x[0] * -3.0}; }}));
OpDef& clip_op = define_op(unary(
    "clip",
    [](const BackwardCtx& c, Tensor* g) {
      const auto& a = c.attrs.as<ClipAttrs>();
      const Tensor& x = c.inputs[0];
      g[0] = c.grads[0] * (ge(x, full_like(x, a.lo)) * le(x, full_like(x, a.hi)));
    },
    Save::Inputs, "clip(x: Tensor, min: float, max: float) -> Tensor",
    [](const CallArgs& a) -> Outputs { return {clip(a.tensor(0), a.scalar(1), a.scalar(2))}; },
    Uniform, &attrs_of<ClipAttrs>, {.args = "min=-0.5, max=0.5"}));

// ---- two inputs ------------------------------------------------------------------------
OpDef& add_op =
    define_op(binary("add", bw_add, Save::None, "add(a: Tensor, b: Tensor | float) -> Tensor",
                     invoke2<add, add>, Uniform));
OpDef& sub_op =
    define_op(binary("sub", bw_sub, Save::None, "sub(a: Tensor, b: Tensor | float) -> Tensor",
                     invoke2<sub, sub>, Uniform));
OpDef& mul_op =
    define_op(binary("mul", bw_mul, Save::Inputs, "mul(a: Tensor, b: Tensor | float) -> Tensor",
                     invoke2<mul, mul>, Uniform));
OpDef& div_op =
    define_op(binary("div", bw_div, Save::Inputs | Save::Outputs,
                     "div(a: Tensor, b: Tensor | float) -> Tensor", invoke2<div, div>, Positive));
OpDef& maximum_op = define_op(binary("maximum", bw_maximum, Save::Inputs,
                                     "maximum(a: Tensor, b: Tensor | float) -> Tensor",
                                     invoke2<maximum, maximum>, Distinct));
OpDef& minimum_op = define_op(binary("minimum", bw_minimum, Save::Inputs,
                                     "minimum(a: Tensor, b: Tensor | float) -> Tensor",
                                     invoke2<minimum, minimum>, Distinct));
// Comparisons: 1/0 masks in the inputs' dtype, not differentiable.
OpDef& eq_op =
    define_op(binary("eq", nullptr, Save::None, "eq(a: Tensor, b: Tensor | float) -> Tensor",
                     invoke2<eq, eq>, Uniform));
OpDef& ne_op =
    define_op(binary("ne", nullptr, Save::None, "ne(a: Tensor, b: Tensor | float) -> Tensor",
                     invoke2<ne, ne>, Uniform));
OpDef& gt_op =
    define_op(binary("gt", nullptr, Save::None, "gt(a: Tensor, b: Tensor | float) -> Tensor",
                     invoke2<gt, gt>, Uniform));
OpDef& ge_op =
    define_op(binary("ge", nullptr, Save::None, "ge(a: Tensor, b: Tensor | float) -> Tensor",
                     invoke2<ge, ge>, Uniform));
OpDef& lt_op =
    define_op(binary("lt", nullptr, Save::None, "lt(a: Tensor, b: Tensor | float) -> Tensor",
                     invoke2<lt, lt>, Uniform));
OpDef& le_op =
    define_op(binary("le", nullptr, Save::None, "le(a: Tensor, b: Tensor | float) -> Tensor",
                     invoke2<le, le>, Uniform));

// ---- fused for training: gradients that backward formulas call, and a loss -------------
OpDef& activation_grad_op = define_op({
    .name = "activation_grad",
    .min_inputs = 2,
    .max_inputs = 2,
    .attrs = &attrs_of<ActivationAttrs>,
    .infer = infer_activation_grad,
    .cpu = {activation_grad_kernel},
    .examples = {{.inputs = {{{3, 4}, Uniform}, {{3, 4}, Uniform}},
                  .call = [](std::span<const Tensor> x) -> Outputs {
                    return {activation_backward(Activation::Tanh, x[0], x[1])};
                  }}},
});
OpDef& binary_crossentropy_logits_grad_op = define_op({
    .name = "binary_crossentropy_logits_grad",
    .min_inputs = 2,
    .max_inputs = 2,
    .infer = elementwise("binary_crossentropy_logits_grad").infer,
    .cpu = {elementwise("binary_crossentropy_logits_grad").kernel},
    .examples = {{.inputs = {{{3, 4}, Uniform}, {{3, 4}, Uniform}},
                  .call = [](std::span<const Tensor> x) -> Outputs {
                    return {call(binary_crossentropy_logits_grad_op, {x[0], x[1]})};
                  }}},
});

void bw_binary_crossentropy_logits(const BackwardCtx& c, Tensor* g) {
  const Tensor &z = c.inputs[0], &y = c.inputs[1];
  if (c.need(0))
    g[0] = sum_to(c.grads[0] * call(binary_crossentropy_logits_grad_op, {z, y}), c.input_shape(0));
  if (c.need(1)) g[1] = sum_to(neg(c.grads[0]) * z, c.input_shape(1));
}

OpDef& binary_crossentropy_logits_op = define_op({
    .name = "binary_crossentropy_logits",
    .min_inputs = 2,
    .max_inputs = 2,
    .save = Save::Inputs,
    .infer = elementwise("binary_crossentropy_logits").infer,
    .backward = bw_binary_crossentropy_logits,
    .cpu = {elementwise("binary_crossentropy_logits").kernel},
    .examples = {{.inputs = {{{3, 4}, Uniform}, {{4}, Uniform}},
                  .call = [](std::span<const Tensor> x) -> Outputs {
                    return {binary_crossentropy_logits(x[0], x[1])};
                  }}},
});

// ---- compositions ----------------------------------------------------------------------
OpDef& pow_op = define_op({
    .name = "pow",
    .kind = OpKind::Composite,
    .signature = "pow(x: Tensor, p: float) -> Tensor",
    .invoke = [](const CallArgs& a) -> Outputs { return {pow(a.tensor(0), a.real(1))}; },
    .method = true,
    .examples = {{.inputs = {{{3, 4}, Positive}}, .args = "p=1.5"}},
});
OpDef& gelu_op = define_op({
    .name = "gelu",
    .kind = OpKind::Composite,
    .signature = "gelu(x: Tensor, approximate: bool = False) -> Tensor",
    .invoke = [](const CallArgs& a) -> Outputs { return {gelu(a.tensor(0), a.boolean(1))}; },
    .method = true,
    .doc = "Keras gelu: x * Phi(x) with the normal CDF Phi through erf, or its tanh approximation",
    .examples = {{.inputs = {{{3, 4}}}}},
});
OpDef& activation_op = define_op({
    .name = "activation",
    .kind = OpKind::Composite,
    .signature = "activation(x: Tensor, name: str) -> Tensor",
    .invoke = [](const CallArgs& a) -> Outputs {
      return {activation(a.tensor(0), parse_activation(a.string(1)))};
    },
    .doc = "Applies a Keras activation by name ('linear', 'relu', 'tanh', 'sigmoid', "
           "'hard_sigmoid', 'gelu', "
           "'softmax' over the last axis)",
    .examples = {{.inputs = {{{3, 4}}}, .args = "name='hard_sigmoid'"}},
});

}  // namespace

std::string_view name(Activation a) {
  return visit_activation(a, [](auto act) { return act.name; });
}

namespace {

// "linear, tanh, ... or softmax": the activations `keep` accepts.
template <class Keep> std::string activation_names(Keep keep) {
  std::vector<std::string_view> names;
  for (int i = 0; i < kNumActivations; ++i)
    visit_activation(Activation(i), [&](auto act) {
      if (keep(act)) names.push_back(act.name);
    });
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    out += std::string(i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + std::string(names[i]);
  return out;
}

}  // namespace

Activation parse_activation(const std::string& s) {
  for (int i = 0; i < kNumActivations; ++i)
    if (s == name(Activation(i))) return Activation(i);
  if (s.empty() || s == "none") return Activation::Linear;
  throw ValueError("[activation] unknown activation '" + s + "' (expected " +
                   activation_names([](auto) { return true; }) + ")");
}

void require_elementwise(Activation a, const char* op) {
  visit_activation(a, [&](auto act) {
    ENCORE_CHECK(act.elementwise, ValueError, "[", op, "] activation '", act.name,
                 "' is not elementwise (it normalizes a whole axis); a recurrent cell takes ",
                 activation_names([](auto other) { return other.elementwise; }));
  });
}

Tensor neg(const Tensor& x) { return call(neg_op, {x}); }
Tensor exp(const Tensor& x) { return call(exp_op, {x}); }
Tensor log(const Tensor& x) { return call(log_op, {x}); }
Tensor sqrt(const Tensor& x) { return call(sqrt_op, {x}); }
Tensor tanh(const Tensor& x) { return call(tanh_op, {x}); }
Tensor erf(const Tensor& x) { return call(erf_op, {x}); }
Tensor gelu(const Tensor& x, bool approximate) {
  if (!approximate) return x * (erf(x * 0.70710678118654752440) + 1.0) * 0.5;
  // Keras' approximate=True: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
  return x * (tanh((x + x * x * x * 0.044715) * 0.79788456080286535588) + 1.0) * 0.5;
}
namespace {
const TensorExtension<SigmoidOrigin> kSigmoidOrigin("sigmoid's logits (ops/sigmoid_origin.h)");
}  // namespace

const SigmoidOrigin* sigmoid_origin(const TensorImpl& p) { return kSigmoidOrigin.get(p); }

Tensor unchanged_sigmoid_logits(const Tensor& p) {
  const SigmoidOrigin* origin = sigmoid_origin(*p.impl());
  if (!origin) return {};
  const Tensor z(origin->logits);
  const bool unchanged = origin->storage.lock() == p.storage() &&
                         p.storage()->version() == origin->version &&
                         origin->logits_storage.lock() == z.storage() &&
                         z.storage()->version() == origin->logits_version;
  return unchanged ? z : Tensor();
}

Tensor sigmoid(const Tensor& x) {
  Tensor p = call(sigmoid_op, {x});
  kSigmoidOrigin.set(*p.impl(), std::make_shared<SigmoidOrigin>(
                                    SigmoidOrigin{x.impl_ptr(), x.storage(), x.storage()->version(),
                                                  p.storage(), p.storage()->version()}));
  return p;
}
Tensor relu(const Tensor& x) { return call(relu_op, {x}); }
Tensor abs(const Tensor& x) { return call(abs_op, {x}); }
Tensor softplus(const Tensor& x) { return call(softplus_op, {x}); }
Tensor leaky_relu(const Tensor& x, double alpha) {
  return call(leaky_relu_op, {x}, ScalarAttrs{alpha});
}
Tensor pow(const Tensor& x, double p) { return call(pow_scalar_op, {x}, ScalarAttrs{p}); }
Tensor clip(const Tensor& x, Scalar min, Scalar max) {
  ENCORE_CHECK(!(min.integral && max.integral ? min.i > max.i : min.d > max.d), ValueError,
               "[clip] lower bound ", min.str(), " exceeds upper bound ", max.str());
  return call(clip_op, {x}, ClipAttrs{min, max});
}

Tensor activation(const Tensor& x, Activation name) {
  return visit_activation(name, [&](auto act) { return act.apply(x); });
}

Tensor act::Linear::apply(const Tensor& x) { return x; }
Tensor act::Tanh::apply(const Tensor& x) { return tanh(x); }
Tensor act::Sigmoid::apply(const Tensor& x) { return sigmoid(x); }
Tensor act::Relu::apply(const Tensor& x) { return relu(x); }
Tensor act::HardSigmoid::apply(const Tensor& x) { return clip(x * 0.2 + 0.5, 0.0, 1.0); }
Tensor act::Gelu::apply(const Tensor& x) { return gelu(x); }
Tensor act::Softmax::apply(const Tensor& x) { return softmax(x, -1); }

Tensor binary_crossentropy_logits(const Tensor& z, const Tensor& y) {
  return call(binary_crossentropy_logits_op, {z, y});
}

Tensor activation_backward(Activation a, const Tensor& gy, const Tensor& y) {
  if (a == Activation::Linear) return gy;
  return call(activation_grad_op, {gy, y}, ActivationAttrs{a});
}

Tensor add(const Tensor& a, const Tensor& b) { return call(add_op, {a, b}); }
Tensor sub(const Tensor& a, const Tensor& b) { return call(sub_op, {a, b}); }
Tensor mul(const Tensor& a, const Tensor& b) { return call(mul_op, {a, b}); }
Tensor div(const Tensor& a, const Tensor& b) { return call(div_op, {a, b}); }
Tensor maximum(const Tensor& a, const Tensor& b) { return call(maximum_op, {a, b}); }
Tensor minimum(const Tensor& a, const Tensor& b) { return call(minimum_op, {a, b}); }
Tensor add(const Tensor& a, Scalar b) { return call(add_scalar_op, {a}, ScalarAttrs{b}); }
Tensor sub(const Tensor& a, Scalar b) { return add(a, -b); }
Tensor mul(const Tensor& a, Scalar b) { return call(mul_scalar_op, {a}, ScalarAttrs{b}); }
Tensor div(const Tensor& a, Scalar b) { return div(a, operand(a, b, "div")); }
Tensor maximum(const Tensor& a, Scalar b) { return maximum(a, operand(a, b, "maximum")); }
Tensor minimum(const Tensor& a, Scalar b) { return minimum(a, operand(a, b, "minimum")); }

Tensor eq(const Tensor& a, const Tensor& b) { return call(eq_op, {a, b}); }
Tensor ne(const Tensor& a, const Tensor& b) { return call(ne_op, {a, b}); }
Tensor gt(const Tensor& a, const Tensor& b) { return call(gt_op, {a, b}); }
Tensor ge(const Tensor& a, const Tensor& b) { return call(ge_op, {a, b}); }
Tensor lt(const Tensor& a, const Tensor& b) { return call(lt_op, {a, b}); }
Tensor le(const Tensor& a, const Tensor& b) { return call(le_op, {a, b}); }
Tensor eq(const Tensor& a, Scalar b) { return eq(a, operand(a, b, "eq")); }
Tensor ne(const Tensor& a, Scalar b) { return ne(a, operand(a, b, "ne")); }
Tensor gt(const Tensor& a, Scalar b) { return gt(a, operand(a, b, "gt")); }
Tensor ge(const Tensor& a, Scalar b) { return ge(a, operand(a, b, "ge")); }
Tensor lt(const Tensor& a, Scalar b) { return lt(a, operand(a, b, "lt")); }
Tensor le(const Tensor& a, Scalar b) { return le(a, operand(a, b, "le")); }

Tensor operator-(const Tensor& x) { return neg(x); }
Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, Scalar b) { return add(a, b); }
Tensor operator-(const Tensor& a, Scalar b) { return sub(a, b); }
Tensor operator*(const Tensor& a, Scalar b) { return mul(a, b); }
Tensor operator/(const Tensor& a, Scalar b) { return div(a, b); }
Tensor operator+(Scalar a, const Tensor& b) { return add(b, a); }
Tensor operator-(Scalar a, const Tensor& b) { return add(neg(b), a); }
Tensor operator*(Scalar a, const Tensor& b) { return mul(b, a); }
Tensor operator/(Scalar a, const Tensor& b) { return div(operand(b, a, "div"), b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }

}  // namespace encore
