// CUDA kernels of the embedding family (ops/defs/embedding.cpp). A kernel cannot throw: an
// index outside the table leaves its output row 0 (forward) or adds nothing (backward), and
// the op is reported through the device's error word, raised as a ValueError at the next
// synchronization.
#include "ops/cuda/device/vector.cuh"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.h"
#include "ops/embedding.h"

namespace encore::cuda {
namespace {

// One thread per output entry (n, d).
template <class T, class I>
__global__ void embedding_forward(const T* __restrict__ table, const I* __restrict__ indices,
                                  T* __restrict__ out, int64_t count, int64_t rows, int64_t width,
                                  int* error, int code) {
  for (int64_t e = thread_index(); e < count * width; e += thread_count()) {
    const int64_t n = e / width, d = e % width;
    const int64_t k = static_cast<int64_t>(indices[n]);
    if (embedding_row(k, rows)) {
      out[e] = table[k * width + d];
    } else {
      *reinterpret_cast<volatile int*>(error) = code;
      out[e] = T(0);
    }
  }
}

// Deterministic scatter-add without atomics: thread (p, d) owns column d of the table rows
// k with k % parts == p and adds the gradients of the indices naming them in index order,
// the order of the CPU kernel, so both backends sum each row bit for bit alike.
template <class T, class I>
__global__ void embedding_backward(const T* __restrict__ g, const I* __restrict__ indices,
                                   T* __restrict__ out, int64_t count, int64_t rows, int64_t width,
                                   int64_t parts, int* error, int code) {
  for (int64_t e = thread_index(); e < parts * width; e += thread_count()) {
    const int64_t p = e / width, d = e % width;
    for (int64_t n = 0; n < count; ++n) {
      const int64_t k = static_cast<int64_t>(indices[n]);
      if (!embedding_row(k, rows)) {
        if (p == 0 && d == 0) *reinterpret_cast<volatile int*>(error) = code;
      } else if (k % parts == p) {
        out[k * width + d] += g[n * width + d];
      }
    }
  }
}

// Calls run.template operator()<T, I>() for the float type of the first input (the table, or
// the gradient) and the type of the indices.
template <class F> void visit_embedding(const KernelCtx& c, F&& run) {
  visit_float(c.in[0].dtype, [&]<class T>() {
    if (c.in[1].dtype == DType::Int32)
      run.template operator()<T, int32_t>();
    else
      run.template operator()<T, int64_t>();
  });
}

void embedding_kernel(const KernelCtx& c) {
  const OnDevice dev(c);
  static const int code = error_code(c.op);
  const TensorRef &table = c.in[0], &indices = c.in[1], &out = c.out[0];
  const int64_t count = indices.numel(), rows = table.shape[0], width = table.shape[1];
  if (out.numel() == 0) return;
  int* error = error_flag(dev.device());
  visit_embedding(c, [&, code = code]<class T, class I>() {
    embedding_forward<T, I><<<grid_for(count * width), kBlock, 0, dev.stream()>>>(
        table.ptr<const T>(), indices.ptr<const I>(), out.ptr<T>(), count, rows, width, error,
        code);
  });
  ENCORE_CUDA_LAUNCH_CHECK(c.op);
}

void embedding_backward_kernel(const KernelCtx& c) {
  const OnDevice dev(c);
  static const int code = error_code(c.op);
  const TensorRef &g = c.in[0], &indices = c.in[1], &out = c.out[0];
  const int64_t count = indices.numel(), rows = out.shape[0], width = out.shape[1];
  if (out.numel() == 0) return;
  ENCORE_CUDA_CHECK(c.op,
                    cudaMemsetAsync(out.data, 0, out.numel() * itemsize(out.dtype), dev.stream()));
  if (count == 0) return;
  int* error = error_flag(dev.device());
  // Enough row groups for about 64K threads, each scanning every index.
  const int64_t parts = std::clamp<int64_t>((int64_t{1} << 16) / width, 1, rows);
  visit_embedding(c, [&, code = code]<class T, class I>() {
    embedding_backward<T, I><<<grid_for(parts * width), kBlock, 0, dev.stream()>>>(
        g.ptr<const T>(), indices.ptr<const I>(), out.ptr<T>(), count, rows, width, parts, error,
        code);
  });
  ENCORE_CUDA_LAUNCH_CHECK(c.op);
}

}  // namespace

const bool kRegistered = register_cuda_kernels({
    {"embedding", embedding_kernel},
    {"embedding_backward", embedding_backward_kernel},
});

}  // namespace encore::cuda
