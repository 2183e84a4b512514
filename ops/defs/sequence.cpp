// Ops over the valid prefix of each sequence, for exact bucketing (graph/bucket.h): the
// lengths are a tensor, so one graph serves every length of its bucket. reverse_sequence
// reverses the first `lengths` entries along an axis (tf.reverse_sequence); mask_sequence
// overwrites the entries past them. Rows, shape inference, backward formulas, CPU kernels and
// public functions.
#include "ops/sequence.h"

#include "ops/defs/common.h"

namespace encore {
namespace {

// x (d0, ..., n, ...), lengths (1,) or (d0,) integers; the sequence axis comes after axis 0
// when there is one length per row.
int infer_sequence(const OpDef& op, std::span<const Tensor> in, const Attrs& a, TensorMeta* out) {
  const Tensor &x = in[0], &lengths = in[1];
  const int axis = a.as<SequenceAttrs>().axis;
  ENCORE_CHECK(axis >= 0 && axis < x.dim(), ShapeError, "[", op.name, "] axis ", axis,
               " out of range for ", describe(x));
  ENCORE_CHECK(lengths.dtype() == DType::Int32 || lengths.dtype() == DType::Int64, DTypeError, "[",
               op.name, "] lengths must be int32 or int64, got ", describe(lengths));
  ENCORE_CHECK(
      lengths.dim() == 1 && (lengths.numel() == 1 || (axis > 0 && lengths.numel() == x.shape()[0])),
      ShapeError, "[", op.name, "] lengths ", lengths.shape().str(),
      " must be (1,) or, one per row of ", x.shape().str(), " along axis ", axis, " > 0, (",
      x.shape()[0], ",)");
  ENCORE_CHECK(x.device() == lengths.device(), DeviceError, "[", op.name, "] ", describe(x),
               " and lengths ", describe(lengths), " are on different devices");
  out[0] = defs::meta_like(x);
  return 1;
}
void bw_reverse_sequence(const BackwardCtx& c, Tensor* g) {
  g[0] = reverse_sequence(c.grads[0], c.inputs[1], c.attrs.as<SequenceAttrs>().axis);
}
void bw_mask_sequence(const BackwardCtx& c, Tensor* g) {
  g[0] = mask_sequence(c.grads[0], c.inputs[1], c.attrs.as<SequenceAttrs>().axis, 0.0);
}

template <bool Reverse, class T, class I> void sequence_cpu(const KernelCtx& c) {
  const TensorRef &x = c.in[0], &len = c.in[1], &y = c.out[0];
  const int axis = c.attrs.as<SequenceAttrs>().axis;
  const int64_t n = x.shape[axis];
  int64_t outer = 1, after = 1;
  for (int d = 0; d < axis; ++d) outer *= x.shape[d];
  for (int d = axis + 1; d < x.shape.size(); ++d) after *= x.shape[d];
  const T* in = x.ptr<const T>();
  const I* lengths = len.ptr<const I>();
  T* out = y.ptr<T>();
  const T fill = static_cast<T>(c.attrs.as<SequenceAttrs>().value);
  for (int64_t o = 0; o < outer; ++o) {
    const int64_t l = seq::clamp_length(
        static_cast<int64_t>(lengths[seq::length_row(o, outer, x.shape[0], len.numel())]), n);
    for (int64_t j = 0; j < n; ++j) {
      T* dst = out + (o * n + j) * after;
      if constexpr (Reverse) {
        const T* src = in + (o * n + seq::reversed_source(j, l)) * after;
        std::copy(src, src + after, dst);
      } else if (j < l) {
        std::copy(in + (o * n + j) * after, in + (o * n + j + 1) * after, dst);
      } else {
        std::fill(dst, dst + after, fill);
      }
    }
  }
}
template <bool Reverse> void sequence_kernel(const KernelCtx& c) {
  visit_dtype(c.in[0].dtype, [&]<class T>() {
    if (c.in[1].dtype == DType::Int32)
      sequence_cpu<Reverse, T, int32_t>(c);
    else
      sequence_cpu<Reverse, T, int64_t>(c);
  });
}

Outputs one(const Tensor& t) { return {t}; }

}  // namespace

OpDef& reverse_sequence_op = define_op({
    .name = "reverse_sequence",
    .min_inputs = 2,
    .max_inputs = 2,
    .nondiff = 0b10,
    .save = Save::Inputs,
    .contiguous_inputs = true,
    .attrs = &attrs_of<SequenceAttrs>,
    .infer = infer_sequence,
    .backward = bw_reverse_sequence,
    .cpu = {sequence_kernel<true>},
    .signature = "reverse_sequence(x: Tensor, lengths: Tensor, axis: int = 1) -> Tensor",
    .invoke =
        [](const CallArgs& a) {
          return one(reverse_sequence(a.tensor(0), a.tensor(1), a.integer(2)));
        },
    .doc = "Reverses the first lengths[b] entries along `axis` of each row b (one length for all "
           "rows when "
           "lengths is (1,)); the entries past them stay in place",
    .examples = {{.inputs = {{{3, 5, 2}}, {{3}, ExampleInput::Index, 6}}, .args = "axis=1"}},
});
OpDef& mask_sequence_op = define_op({
    .name = "mask_sequence",
    .min_inputs = 2,
    .max_inputs = 2,
    .nondiff = 0b10,
    .save = Save::Inputs,
    .contiguous_inputs = true,
    .attrs = &attrs_of<SequenceAttrs>,
    .infer = infer_sequence,
    .backward = bw_mask_sequence,
    .cpu = {sequence_kernel<false>},
    .signature =
        "mask_sequence(x: Tensor, lengths: Tensor, axis: int = 1, value: float = 0.0) -> Tensor",
    .invoke =
        [](const CallArgs& a) {
          return one(mask_sequence(a.tensor(0), a.tensor(1), a.integer(2), a.real(3)));
        },
    .doc = "x with the entries at or past lengths[b] along `axis` of each row b set to `value` "
           "(one length for "
           "all rows when lengths is (1,))",
    .examples = {{.inputs = {{{3, 5, 2}}, {{3}, ExampleInput::Index, 6}},
                  .args = "axis=1, value=-2.0"}},
});

Tensor reverse_sequence(const Tensor& x, const Tensor& lengths, int64_t axis) {
  return call(reverse_sequence_op, {x, lengths},
              SequenceAttrs{normalize_axis(axis, x.dim(), "reverse_sequence"), 0.0});
}
Tensor mask_sequence(const Tensor& x, const Tensor& lengths, int64_t axis, double value) {
  return call(mask_sequence_op, {x, lengths},
              SequenceAttrs{normalize_axis(axis, x.dim(), "mask_sequence"), value});
}

}  // namespace encore
