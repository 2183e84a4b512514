// CUDA kernels for the two-input elementwise ops with NumPy
// broadcasting. Dense operands (or one operand broadcast from a single element) take 16-byte
// vector loads; every other broadcast or strided view goes through Geometry.
#include "ops/cuda/device/vector.cuh"
#include "ops/cuda/indexing.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.h"
#include "ops/elementwise.h"
#include "ops/epilogue.h"

namespace encore::cuda {
namespace {

// One value of an operand: element i, or its single element when it is broadcast.
template <bool Scalar, class T> __device__ __forceinline__ T at(const T* p, int64_t i) {
  return Scalar ? p[0] : p[i];
}

template <bool Scalar, class T> __device__ __forceinline__ Vec<T> pack_at(const T* p, int64_t i) {
  if constexpr (Scalar) {
    Vec<T> v;
#pragma unroll
    for (int j = 0; j < Vec<T>::n; ++j) v.v[j] = p[0];
    return v;
  } else {
    return reinterpret_cast<const Vec<T>*>(p)[i];
  }
}

template <class F, class T, bool ScalarA, bool ScalarB>
__global__ void binary_dense(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ y,
                             int64_t n, bool vectorized, F f) {
  int64_t done = 0;
  if (vectorized) {
    const int64_t packs = n / Vec<T>::n;
    auto* yv = reinterpret_cast<Vec<T>*>(y);
    for (int64_t i = thread_index(); i < packs; i += thread_count()) {
      const Vec<T> va = pack_at<ScalarA>(a, i), vb = pack_at<ScalarB>(b, i);
      Vec<T> r;
#pragma unroll
      for (int j = 0; j < Vec<T>::n; ++j) r.v[j] = f(va.v[j], vb.v[j]);
      yv[i] = r;
    }
    done = packs * Vec<T>::n;
  }
  for (int64_t i = done + thread_index(); i < n; i += thread_count())
    y[i] = f(at<ScalarA>(a, i), at<ScalarB>(b, i));
}

template <class F, class T, class Index>
__global__ void binary_strided(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ y,
                               Geometry<3> g, Index n, F f) {
  const Index step = static_cast<Index>(gridDim.x) * blockDim.x;
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t off[3];
    g.offsets(i, off);
    y[off[0]] = f(a[off[1]], b[off[2]]);
  }
}

template <class F, class T, bool ScalarA, bool ScalarB>
void launch_dense(const T* a, const T* b, T* y, int64_t n, F f, cudaStream_t stream) {
  const bool vec = aligned16(y) && (ScalarA || aligned16(a)) && (ScalarB || aligned16(b));
  binary_dense<F, T, ScalarA, ScalarB>
      <<<grid_for(vec ? n / Vec<T>::n + 1 : n), kBlock, 0, stream>>>(a, b, y, n, vec, f);
}

template <class F, class T>
void binary(const TensorRef& a, const TensorRef& b, const TensorRef& y, F f, cudaStream_t stream,
            const char* op) {
  const int64_t n = y.numel();
  if (n == 0) return;
  const Geometry<3> g = make_geometry<3>(
      y.shape, {y.strides, broadcast_strides(a, y.shape), broadcast_strides(b, y.shape)});
  const T* pa = a.ptr<const T>();
  const T* pb = b.ptr<const T>();
  T* out = y.ptr<T>();
  if (g.dense(0) && g.dense(1) && g.dense(2)) {
    launch_dense<F, T, false, false>(pa, pb, out, n, f, stream);
  } else if (g.dense(0) && g.dense(1) && g.scalar(2)) {
    launch_dense<F, T, false, true>(pa, pb, out, n, f, stream);
  } else if (g.dense(0) && g.scalar(1) && g.dense(2)) {
    launch_dense<F, T, true, false>(pa, pb, out, n, f, stream);
  } else if (small_index(n)) {
    binary_strided<F, T, uint32_t>
        <<<grid_for(n), kBlock, 0, stream>>>(pa, pb, out, g, static_cast<uint32_t>(n), f);
  } else {
    binary_strided<F, T, uint64_t>
        <<<grid_for(n), kBlock, 0, stream>>>(pa, pb, out, g, static_cast<uint64_t>(n), f);
  }
  ENCORE_CUDA_LAUNCH_CHECK(op);
}

template <class F, DTypeClass C = DTypeClass::Numeric> void binary_kernel(const KernelCtx& c) {
  const OnDevice dev(c);
  const auto run = [&]<class T>() {
    binary<F, T>(c.in[0], c.in[1], c.out[0], F{}, dev.stream(), c.op);
  };
  if constexpr (C == DTypeClass::Float)
    visit_float(c.in[0].dtype, run);
  else
    visit_dtype(c.in[0].dtype, run);
}

void activation_grad_kernel(const KernelCtx& c) {
  with_activation_grad(c.attrs.as<ActivationAttrs>().activation, c.op,
                       [&]<class F>(F) { binary_kernel<F, DTypeClass::Float>(c); });
}

}  // namespace

// A kernel for every two-input op of the elementwise list (ops/elementwise.h), and the
// activation gradients.
const bool kRegistered = [] {
  for_each_elementwise_op([](const auto& op) {
    using Op = std::decay_t<decltype(op)>;
    if constexpr (Op::arity == 2)
      register_kernel(std::string(op.name).c_str(), DeviceType::CUDA,
                      {binary_kernel<typename Op::Functor, Op::dtypes>});
  });
  return register_cuda_kernels({{"activation_grad", activation_grad_kernel}});
}();

}  // namespace encore::cuda
