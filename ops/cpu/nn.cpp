// CPU kernels for softmax, dropout, gather/scatter and the fused LSTM cell.
#include <cstring>

#include "ops/cpu/kernels.h"
#include "ops/functors.h"
#include "ops/lstm_math.h"
#include "ops/philox.h"

namespace encore::cpu {
namespace {

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
  const int axis = std::get<AxisAttrs>(c.attrs).axis;
  visit_float(c.in[0].dtype, [&]<class T>() { softmax<T, Log>(c.in[0], c.out[0], axis); });
}

void dropout_kernel(const KernelCtx& c) {
  const double p = std::get<DropoutAttrs>(c.attrs).p;
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

template <class T, class I> void gather_last(const TensorRef& x, const TensorRef& idx, const TensorRef& y) {
  const int64_t rows = y.numel(), n = x.shape.back();
  const T* in = x.ptr<const T>();
  const I* ix = idx.ptr<const I>();
  T* out = y.ptr<T>();
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t k = ix[r];
    ENCORE_CHECK(k >= 0 && k < n, ValueError, "[gather_last] index ", k, " is out of range for an axis of size ", n);
    out[r] = in[r * n + k];
  }
}

template <class T, class I> void scatter_last(const TensorRef& g, const TensorRef& idx, const TensorRef& y) {
  const int64_t rows = g.numel(), n = y.shape.back();
  const T* in = g.ptr<const T>();
  const I* ix = idx.ptr<const I>();
  T* out = y.ptr<T>();
  std::memset(out, 0, rows * n * sizeof(T));
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t k = ix[r];
    ENCORE_CHECK(k >= 0 && k < n, ValueError, "[scatter_last] index ", k, " is out of range for an axis of size ", n);
    out[r * n + k] = in[r];
  }
}

template <bool Gather> void gather_scatter_kernel(const KernelCtx& c) {
  visit_dtype(c.in[0].dtype, [&]<class T>() {
    auto run = [&]<class I>() {
      if constexpr (Gather) gather_last<T, I>(c.in[0], c.in[1], c.out[0]);
      else scatter_last<T, I>(c.in[0], c.in[1], c.out[0]);
    };
    if (c.in[1].dtype == DType::Int32) run.template operator()<int32_t>();
    else run.template operator()<int64_t>();
  });
}

template <class T> void lstm_cell(const KernelCtx& c) {
  const auto& a = std::get<LstmAttrs>(c.attrs);
  const int64_t batch = c.in[1].shape[0], units = c.in[1].shape[1];
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t u = 0; u < units; ++u)
      lstm_cell_unit(c.in[0].ptr<const T>(), c.in[1].ptr<const T>(), c.out[0].ptr<T>(), c.out[1].ptr<T>(), b, u,
                     units, a.activation, a.recurrent_activation);
}

template <class T> void lstm_cell_backward(const KernelCtx& c) {
  const auto& a = std::get<LstmAttrs>(c.attrs);
  const int64_t batch = c.in[1].shape[0], units = c.in[1].shape[1];
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t u = 0; u < units; ++u)
      lstm_cell_backward_unit(c.in[0].ptr<const T>(), c.in[1].ptr<const T>(), c.in[2].ptr<const T>(),
                              c.in[3].ptr<const T>(), c.in[4].ptr<const T>(), c.out[0].ptr<T>(),
                              c.out[1].ptr<T>(), b, u, units, a.activation, a.recurrent_activation);
}

}  // namespace

void register_nn() {
  set_kernel(OpId::softmax, softmax_kernel<false>);
  set_kernel(OpId::log_softmax, softmax_kernel<true>);
  set_kernel(OpId::dropout, dropout_kernel);
  set_kernel(OpId::gather_last, gather_scatter_kernel<true>);
  set_kernel(OpId::scatter_last, gather_scatter_kernel<false>);
  set_kernel(OpId::lstm_cell, [](const KernelCtx& c) {
    visit_float(c.in[0].dtype, [&]<class T>() { lstm_cell<T>(c); });
  });
  set_kernel(OpId::lstm_cell_backward, [](const KernelCtx& c) {
    visit_float(c.in[0].dtype, [&]<class T>() { lstm_cell_backward<T>(c); });
  });
}

}  // namespace encore::cpu
