// CUDA kernels that move data: copies between layouts and dtypes, concat, slice_grad, flip,
// and the simple in-place updates. All of them are one strided update kernel,
// dst[i] = f(dst[i], src[i]) with src broadcast to dst, or a dense memcpy where that suffices.
#include "ops/cuda/copy.h"
#include "ops/cuda/device/vector.cuh"
#include "ops/cuda/indexing.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.h"
#include "ops/data.h"
#include "ops/elementwise.h"
#include "ops/functors.h"

namespace encore::cuda {
namespace {

struct Assign {
  template <class TD, class TS> __device__ __forceinline__ TD operator()(TD, TS s) const {
    return fn::cast_value<TD>(s);
  }
};
struct AddTo {
  template <class T> __device__ __forceinline__ T operator()(T d, T s) const {
    return fn::wrap_add(d, s);
  }
};

template <class TD, class TS, class F, class Index>
__global__ void update_strided(TD* dst, const TS* src, Geometry<2> g, Index n, F f) {
  const Index step = static_cast<Index>(gridDim.x) * blockDim.x;
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t off[2];
    g.offsets(i, off);
    dst[off[0]] = f(dst[off[0]], src[off[1]]);
  }
}

template <class T, class F, class Index>
__global__ void update_scalar(T* dst, T value, Geometry<1> g, Index n, F f) {
  const Index step = static_cast<Index>(gridDim.x) * blockDim.x;
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t off[1];
    g.offsets(i, off);
    dst[off[0]] = f(dst[off[0]], value);
  }
}

// dst = f(dst, src) over dst's shape, src broadcast to it.
template <class TD, class TS, class F>
void update(const TensorRef& dst, const TensorRef& src, F f, cudaStream_t stream, const char* op) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  const Geometry<2> g =
      make_geometry<2>(dst.shape, {dst.strides, broadcast_strides(src, dst.shape)});
  if (small_index(n))
    update_strided<TD, TS, F, uint32_t><<<grid_for(n), kBlock, 0, stream>>>(
        dst.ptr<TD>(), src.ptr<const TS>(), g, static_cast<uint32_t>(n), f);
  else
    update_strided<TD, TS, F, uint64_t><<<grid_for(n), kBlock, 0, stream>>>(
        dst.ptr<TD>(), src.ptr<const TS>(), g, static_cast<uint64_t>(n), f);
  ENCORE_CUDA_LAUNCH_CHECK(op);
}

template <class T, class F>
void update_with(const TensorRef& dst, T value, F f, cudaStream_t stream, const char* op) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  const Geometry<1> g = make_geometry<1>(dst.shape, {dst.strides});
  if (small_index(n))
    update_scalar<T, F, uint32_t>
        <<<grid_for(n), kBlock, 0, stream>>>(dst.ptr<T>(), value, g, static_cast<uint32_t>(n), f);
  else
    update_scalar<T, F, uint64_t>
        <<<grid_for(n), kBlock, 0, stream>>>(dst.ptr<T>(), value, g, static_cast<uint64_t>(n), f);
  ENCORE_CUDA_LAUNCH_CHECK(op);
}

void copy_kernel(const KernelCtx& c) {
  const OnDevice dev(c);
  strided_copy(c.out[0], c.in[0], dev.stream(), "copy");
}

void copy_inplace_kernel(const KernelCtx& c) {
  const OnDevice dev(c);
  strided_copy(c.in[0], c.in[1], dev.stream(), "copy_");
}

void add_inplace_kernel(const KernelCtx& c) {
  const OnDevice dev(c);
  visit_dtype(c.in[0].dtype,
              [&]<class T>() { update<T, T>(c.in[0], c.in[1], AddTo{}, dev.stream(), "add_"); });
}

void cast_kernel(const KernelCtx& c) {
  const OnDevice dev(c);
  visit_dtype(c.in[0].dtype, [&]<class TS>() {
    visit_dtype(c.out[0].dtype, [&]<class TD>() {
      update<TD, TS>(c.out[0], c.in[0], Assign{}, dev.stream(), "cast");
    });
  });
}

void fill_kernel(const KernelCtx& c) {
  const OnDevice dev(c);
  const Scalar& v = c.attrs.as<ScalarAttrs>().value;
  visit_dtype(c.in[0].dtype, [&]<class T>() {
    update_with<T>(c.in[0], fn::scalar_as<T>(v), Assign{}, dev.stream(), "fill_");
  });
}

void add_scalar_inplace_kernel(const KernelCtx& c) {
  const OnDevice dev(c);
  const Scalar& v = c.attrs.as<ScalarAttrs>().value;
  visit_dtype(c.in[0].dtype, [&]<class T>() {
    update_with<T>(c.in[0], fn::scalar_as<T>(v), AddTo{}, dev.stream(), "add_scalar_");
  });
}

void concat_kernel(const KernelCtx& c) {
  const OnDevice dev(c);
  const int axis = c.attrs.as<AxisAttrs>().axis;
  int64_t start = 0;
  for (const TensorRef& x : c.in) {
    if (x.numel() > 0)
      strided_copy(sub_view(c.out[0], axis, start, x.shape), x, dev.stream(), "concat");
    start += x.shape[axis];
  }
}

void slice_grad_kernel(const KernelCtx& c) {
  const OnDevice dev(c);
  const auto& s = c.attrs.as<SliceAttrs>();
  const TensorRef& out = c.out[0];
  if (out.numel() == 0) return;
  ENCORE_CUDA_CHECK("slice_grad",
                    cudaMemsetAsync(out.data, 0, out.numel() * itemsize(out.dtype), dev.stream()));
  if (c.in[0].numel() == 0) return;
  strided_copy(sub_view(out, s.axis, s.start, c.in[0].shape, s.step), c.in[0], dev.stream(),
               "slice_grad");
}

void flip_kernel(const KernelCtx& c) {
  const OnDevice dev(c);
  const int axis = c.attrs.as<AxisAttrs>().axis;
  TensorRef src = c.in[0];
  const int64_t n = src.shape[axis];
  if (n == 0 || src.numel() == 0) return;
  // Read the input backwards along `axis`: start at its last entry with a negated stride.
  src.data = static_cast<char*>(src.data) +
             (n - 1) * src.strides[axis] * static_cast<int64_t>(itemsize(src.dtype));
  src.strides[axis] = -src.strides[axis];
  strided_copy(c.out[0], src, dev.stream(), "flip");
}

}  // namespace

void strided_copy(const TensorRef& dst, const TensorRef& src, cudaStream_t stream, const char* op) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  if (dst.contiguous() && src.contiguous() && src.numel() == n) {
    ENCORE_CUDA_CHECK(op, cudaMemcpyAsync(dst.data, src.data, n * itemsize(dst.dtype),
                                          cudaMemcpyDeviceToDevice, stream));
    return;
  }
  visit_dtype(dst.dtype, [&]<class T>() { update<T, T>(dst, src, Assign{}, stream, op); });
}

const bool kRegistered = register_cuda_kernels({
    {"copy", copy_kernel},
    {"cast", cast_kernel},
    {"concat", concat_kernel},
    {"slice_grad", slice_grad_kernel},
    {"flip", flip_kernel},
    {"copy_", copy_inplace_kernel},
    {"add_", add_inplace_kernel},
    {"fill_", fill_kernel},
    {"add_scalar_", add_scalar_inplace_kernel},
});

}  // namespace encore::cuda
