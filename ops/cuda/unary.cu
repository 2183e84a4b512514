// CUDA kernels for the one-input elementwise ops: a dense kernel with
// 16-byte vector loads, and a strided one for views. Outputs are contiguous.
#include "ops/cuda/device/vector.cuh"
#include "ops/cuda/indexing.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.h"
#include "ops/elementwise.h"

namespace encore::cuda {
namespace {

template <class F, class T>
__global__ void unary_dense(const T* __restrict__ x, T* __restrict__ y, int64_t n, bool vectorized,
                            F f) {
  int64_t done = 0;
  if (vectorized) {
    const int64_t packs = n / Vec<T>::n;
    const auto* xv = reinterpret_cast<const Vec<T>*>(x);
    auto* yv = reinterpret_cast<Vec<T>*>(y);
    for (int64_t i = thread_index(); i < packs; i += thread_count()) {
      Vec<T> p = xv[i];
#pragma unroll
      for (int j = 0; j < Vec<T>::n; ++j) p.v[j] = f(p.v[j]);
      yv[i] = p;
    }
    done = packs * Vec<T>::n;
  }
  for (int64_t i = done + thread_index(); i < n; i += thread_count()) y[i] = f(x[i]);
}

template <class F, class T, class Index>
__global__ void unary_strided(const T* __restrict__ x, T* __restrict__ y, Geometry<2> g, Index n,
                              F f) {
  const Index step = static_cast<Index>(gridDim.x) * blockDim.x;
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t off[2];
    g.offsets(i, off);
    y[off[0]] = f(x[off[1]]);
  }
}

template <class F, class T>
void unary(const TensorRef& x, const TensorRef& y, F f, cudaStream_t stream, const char* op) {
  const int64_t n = y.numel();
  if (n == 0) return;
  const Geometry<2> g = make_geometry<2>(y.shape, {y.strides, x.strides});
  const T* in = x.ptr<const T>();
  T* out = y.ptr<T>();
  if (g.dense(0) && g.dense(1)) {
    const bool vec = aligned16(in) && aligned16(out);
    unary_dense<F, T>
        <<<grid_for(vec ? n / Vec<T>::n + 1 : n), kBlock, 0, stream>>>(in, out, n, vec, f);
  } else if (small_index(n)) {
    unary_strided<F, T, uint32_t>
        <<<grid_for(n), kBlock, 0, stream>>>(in, out, g, static_cast<uint32_t>(n), f);
  } else {
    unary_strided<F, T, uint64_t>
        <<<grid_for(n), kBlock, 0, stream>>>(in, out, g, static_cast<uint64_t>(n), f);
  }
  ENCORE_CUDA_LAUNCH_CHECK(op);
}

template <class F, DTypeClass C> void unary_kernel(const KernelCtx& c) {
  const OnDevice dev(c);
  const F f = make_functor<F>(c.attrs);
  auto run = [&]<class T>() { unary<F, T>(c.in[0], c.out[0], f, dev.stream(), c.op); };
  if constexpr (C == DTypeClass::Float)
    visit_float(c.in[0].dtype, run);
  else
    visit_dtype(c.in[0].dtype, run);
}

}  // namespace

// A kernel for every one-input op of the elementwise list (ops/elementwise.h).
const bool kRegistered = [] {
  for_each_elementwise_op([](const auto& op) {
    using Op = std::decay_t<decltype(op)>;
    if constexpr (Op::arity == 1)
      register_kernel(std::string(op.name).c_str(), DeviceType::CUDA,
                      {unary_kernel<typename Op::Functor, Op::dtypes>});
  });
  return true;
}();

}  // namespace encore::cuda
