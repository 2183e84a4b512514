// Embedding lookup: rows of a table picked by integer indices of any shape, and its gradient,
// a deterministic scatter-add of the output gradient into the rows (indices in order, so a
// repeated index sums its gradients in the same order on every run and backend): rows, shape
// inference, backward formulas, CPU kernels and the public function.
#include "ops/embedding.h"

#include <cstring>

#include "ops/defs/common.h"

namespace encore {
namespace {

const OpDef& embedding_backward_op();

void check_indices(const char* op, const Tensor& indices) {
  ENCORE_CHECK(indices.dtype() == DType::Int32 || indices.dtype() == DType::Int64, DTypeError, "[",
               op, "] indices must be int32 or int64, got ", describe(indices),
               is_floating(indices.dtype()) ? "; convert them with .to(int64)" : "");
}

Shape with_row(const Shape& indices, int64_t row) {
  ENCORE_CHECK(indices.size() < kMaxDims, ShapeError, "[embedding] indices ", indices.str(),
               " have too many axes for one more");
  Shape s = indices;
  s.push_back(row);
  return s;
}

// embedding(table (input_dim, output_dim), indices (...)) -> (..., output_dim)
int infer_embedding(const OpDef&, std::span<const Tensor> in, const Attrs&, TensorMeta* out) {
  const Tensor &table = in[0], &indices = in[1];
  defs::require_float("embedding", table);
  ENCORE_CHECK(table.dim() == 2, ShapeError,
               "[embedding] the table must be (input_dim, output_dim), got ", describe(table));
  check_indices("embedding", indices);
  out[0] = defs::meta(with_row(indices.shape(), table.shape()[1]), table.dtype(), table.device());
  return 1;
}
void bw_embedding(const BackwardCtx& c, Tensor* g) {
  const Tensor in[] = {c.grads[0], c.inputs[1]};
  g[0] = dispatch(embedding_backward_op(), in, EmbeddingAttrs{c.input_shape(0)[0]})[0];
}

// embedding_backward(grad (..., output_dim), indices (...)) -> (input_dim, output_dim)
int infer_embedding_backward(const OpDef&, std::span<const Tensor> in, const Attrs& a,
                             TensorMeta* out) {
  const Tensor &g = in[0], &indices = in[1];
  check_indices("embedding_backward", indices);
  ENCORE_CHECK(
      g.dim() == indices.dim() + 1 && with_row(indices.shape(), g.shape().back()) == g.shape(),
      ShapeError, "[embedding_backward] gradient ", g.shape().str(), " does not match indices ",
      indices.shape().str());
  out[0] = defs::meta({a.as<EmbeddingAttrs>().input_dim, g.shape().back()}, g.dtype(), g.device());
  return 1;
}
void bw_embedding_backward(const BackwardCtx& c, Tensor* g) {
  g[0] = embedding(c.grads[0], c.inputs[1]);
}

template <class I> int64_t index_at(const TensorRef& indices, int64_t n) {
  return indices.ptr<const I>()[n];
}

[[noreturn]] void out_of_range(const TensorRef& indices, int64_t n, int64_t index,
                               int64_t input_dim) {
  throw ValueError(detail::cat("[embedding] index ", index, " (element ", n, " of indices ",
                               indices.shape.str(), ") is out of range for input_dim ", input_dim));
}

template <class T, class I> void embedding_cpu(const KernelCtx& c) {
  const TensorRef &table = c.in[0], &indices = c.in[1];
  const int64_t rows = table.shape[0], width = table.shape[1], count = indices.numel();
  const T* t = table.ptr<const T>();
  T* out = c.out[0].ptr<T>();
  for (int64_t n = 0; n < count; ++n) {
    const int64_t k = index_at<I>(indices, n);
    if (!embedding_row(k, rows)) out_of_range(indices, n, k, rows);
    std::memcpy(out + n * width, t + k * width, width * sizeof(T));
  }
}

template <class T, class I> void embedding_backward_cpu(const KernelCtx& c) {
  const TensorRef &g = c.in[0], &indices = c.in[1], &out = c.out[0];
  const int64_t rows = out.shape[0], width = out.shape[1], count = indices.numel();
  const T* gp = g.ptr<const T>();
  T* o = out.ptr<T>();
  std::memset(o, 0, rows * width * sizeof(T));
  for (int64_t n = 0; n < count; ++n) {
    const int64_t k = index_at<I>(indices, n);
    if (!embedding_row(k, rows)) out_of_range(indices, n, k, rows);
    for (int64_t d = 0; d < width; ++d) o[k * width + d] += gp[n * width + d];
  }
}

template <bool Backward> void embedding_kernel(const KernelCtx& c) {
  visit_float(c.in[0].dtype, [&]<class T>() {
    auto run = [&]<class I>() {
      if constexpr (Backward)
        embedding_backward_cpu<T, I>(c);
      else
        embedding_cpu<T, I>(c);
    };
    if (c.in[1].dtype == DType::Int32)
      run.template operator()<int32_t>();
    else
      run.template operator()<int64_t>();
  });
}

OpDef& embedding_op = define_op({
    .name = "embedding",
    .min_inputs = 2,
    .max_inputs = 2,
    .nondiff = 0b10,
    .save = Save::Inputs,
    .contiguous_inputs = true,
    .infer = infer_embedding,
    .backward = bw_embedding,
    .cpu = {embedding_kernel<false>},
    .signature = "embedding(table: Tensor, indices: Tensor) -> Tensor",
    .invoke = [](const CallArgs& a) -> Outputs { return {embedding(a.tensor(0), a.tensor(1))}; },
    .doc = "The rows of `table` (input_dim, output_dim) at int32/int64 `indices` of any shape: "
           "(..., output_dim). An index outside [0, input_dim) is a ValueError",
    .examples = {{.inputs = {{{5, 3}}, {{2, 4}, ExampleInput::Index, 5}}}},
});
OpDef& embedding_backward_row = define_op({
    .name = "embedding_backward",
    .min_inputs = 2,
    .max_inputs = 2,
    .nondiff = 0b10,
    .save = Save::Inputs,
    .contiguous_inputs = true,
    .attrs = &attrs_of<EmbeddingAttrs>,
    .infer = infer_embedding_backward,
    .backward = bw_embedding_backward,
    .cpu = {embedding_kernel<true>},
    .examples = {{.inputs = {{{2, 4, 3}}, {{2, 4}, ExampleInput::Index, 3}},
                  .call = [](std::span<const Tensor> x) -> Outputs {
                    return {dispatch(embedding_backward_op(), x, EmbeddingAttrs{3})[0]};
                  }}},
});
const OpDef& embedding_backward_op() { return embedding_backward_row; }

}  // namespace

Tensor embedding(const Tensor& table, const Tensor& indices) {
  return call(embedding_op, {table, indices});
}

}  // namespace encore
