// CUDA kernels for full, arange, uniform and normal: the same streams and formulas as
// ops/cpu/creation.cpp. Double arithmetic uses the _rn intrinsics, which the compiler never
// contracts into FMAs, so arange and uniform produce the CPU's bits.
#include <cmath>

#include "ops/creation.h"
#include "ops/cuda/device/philox.cuh"
#include "ops/cuda/device/vector.cuh"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.h"
#include "ops/cuda/random.h"
#include "ops/functors.h"
#include "ops/philox.h"

namespace encore::cuda {
namespace {

__global__ void advance_offset(int64_t* state, uint64_t blocks) {
  state[1] = static_cast<int64_t>(static_cast<uint64_t>(state[1]) + blocks);
}

template <class T> __global__ void fill_kernel(T* __restrict__ y, int64_t n, T v) {
  for (int64_t i = thread_index(); i < n; i += thread_count()) y[i] = v;
}

// As on the CPU: integral start and step count exactly in int64, others in double.
template <class T>
__global__ void arange_kernel(T* __restrict__ y, int64_t n, Scalar start, Scalar step) {
  const bool exact = start.integral && step.integral;
  for (int64_t i = thread_index(); i < n; i += thread_count())
    y[i] = exact ? static_cast<T>(fn::wrap_add(start.i, fn::wrap_mul(step.i, i)))
                 : fn::cast_value<T>(__dadd_rn(start.d, __dmul_rn(step.d, static_cast<double>(i))));
}

template <class T>
__global__ void uniform_kernel(T* __restrict__ y, int64_t n, const int64_t* __restrict__ state,
                               double low, double range) {
  for_each_philox_value(n, state, [&](int64_t i, uint32_t bits) {
    y[i] = static_cast<T>(__dadd_rn(low, __dmul_rn(range, static_cast<double>(uniform01(bits)))));
  });
}

// Box-Muller on value pairs (2i, 2i + 1): one Philox block gives outputs 2b and 2b + 1.
template <class T>
__global__ void normal_kernel(T* __restrict__ y, int64_t n, const int64_t* __restrict__ state,
                              double mean, double std) {
  const uint64_t seed = static_cast<uint64_t>(state[0]), offset = static_cast<uint64_t>(state[1]);
  const int64_t blocks = static_cast<int64_t>(philox_blocks(2 * static_cast<uint64_t>(n)));
  for (int64_t b = thread_index(); b < blocks; b += thread_count()) {
    const Philox4 r = philox(seed, offset + static_cast<uint64_t>(b));
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int64_t i = 2 * b + j;
      if (i >= n) break;
      const double u1 = (r.v[2 * j] + 1.0) / 4294967296.0;
      const double u2 = r.v[2 * j + 1] / 4294967296.0;
      y[i] = static_cast<T>(mean + std * sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
    }
  }
}

void full(const KernelCtx& c) {
  const TensorRef& y = c.out[0];
  const int64_t n = y.numel();
  if (n == 0) return;
  const OnDevice dev(c);
  const Scalar& v = c.attrs.as<FullAttrs>().value;
  visit_dtype(y.dtype, [&]<class T>() {
    fill_kernel<T><<<grid_for(n), kBlock, 0, dev.stream()>>>(y.ptr<T>(), n, fn::scalar_as<T>(v));
  });
  ENCORE_CUDA_LAUNCH_CHECK("full");
}

void arange(const KernelCtx& c) {
  const TensorRef& y = c.out[0];
  const int64_t n = y.numel();
  if (n == 0) return;
  const OnDevice dev(c);
  const auto& a = c.attrs.as<FullAttrs>();
  visit_dtype(y.dtype, [&]<class T>() {
    arange_kernel<T><<<grid_for(n), kBlock, 0, dev.stream()>>>(y.ptr<T>(), n, a.value, a.step);
  });
  ENCORE_CUDA_LAUNCH_CHECK("arange");
}

template <bool Normal> void random(const KernelCtx& c) {
  const char* op = Normal ? "normal" : "uniform";
  const OnDevice dev(c);
  const auto& a = c.attrs.as<FullAttrs>();
  const TensorRef& y = c.out[0];
  const int64_t n = y.numel();
  int64_t* state = c.in[0].ptr<int64_t>();
  const uint64_t blocks = philox_blocks((Normal ? 2 : 1) * static_cast<uint64_t>(n));
  if (n > 0) {
    visit_float(y.dtype, [&]<class T>() {
      if constexpr (Normal)
        normal_kernel<T><<<grid_for(static_cast<int64_t>(blocks)), kBlock, 0, dev.stream()>>>(
            y.ptr<T>(), n, state, a.value.d, a.step.d);
      else
        uniform_kernel<T><<<grid_for(static_cast<int64_t>(blocks)), kBlock, 0, dev.stream()>>>(
            y.ptr<T>(), n, state, a.value.d, a.step.d - a.value.d);
    });
    ENCORE_CUDA_LAUNCH_CHECK(op);
  }
  advance_generator(state, blocks, dev.stream(), op);
}

}  // namespace

void advance_generator(int64_t* state, uint64_t blocks, cudaStream_t stream, const char* op) {
  advance_offset<<<1, 1, 0, stream>>>(state, blocks);
  ENCORE_CUDA_LAUNCH_CHECK(op);
}

const bool kRegistered = register_cuda_kernels({
    {"full", full},
    {"arange", arange},
    {"uniform", random<false>},
    {"normal", random<true>},
});

}  // namespace encore::cuda
