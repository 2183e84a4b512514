// Fused SGD, Adam and RMSprop updates over all parameters in one launch (per dtype, and per chunk
// of kTensors parameters). The parameter table travels by value as a kernel argument — no device
// table to build or upload — and each block finds its tensor from the table's block offsets.
// `lr` and `step` are read from device memory, so a replayed graph follows learning-rate
// changes and the advancing step count. The per-element math is ops/optim_math.h, shared with
// the CPU kernels.
#include <vector>

#include "ops/cuda/device/vector.cuh"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.h"
#include "ops/optim_math.h"

namespace encore::cuda {
namespace {

// Kernel arguments are limited to 4 KiB on older toolkits; 48 tensors of Adam stay well under.
constexpr int kTensors = 48;
constexpr int kChunk = kBlock * 8;  // elements per block

template <class T, int Groups> struct TensorTable {
  T* ptr[Groups][kTensors];  // Groups tensors per parameter, in the op's input order
  int64_t numel[kTensors];
  int64_t
      first_block[kTensors + 1];  // block range of tensor t: [first_block[t], first_block[t + 1])
  int count;

  __device__ int tensor_of(int64_t block) const {
    int lo = 0, hi = count - 1;
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (first_block[mid] <= block)
        lo = mid;
      else
        hi = mid - 1;
    }
    return lo;
  }
};

// Groups: w, momentum buffer (when there is momentum), g.
template <class T, int Groups>
__global__ void sgd_kernel(TensorTable<T, Groups> table, const double* __restrict__ lr,
                           SgdAttrs a) {
  const int t = table.tensor_of(blockIdx.x);
  const int64_t begin = (blockIdx.x - table.first_block[t]) * int64_t{kChunk};
  const int64_t end = begin + kChunk < table.numel[t] ? begin + kChunk : table.numel[t];
  constexpr bool momentum = Groups == 3;
  T* w = table.ptr[0][t];
  T* buf = momentum ? table.ptr[1][t] : w;
  const T* g = table.ptr[Groups - 1][t];
  const SgdStep<T> step{T(*lr), T(a.momentum), T(a.weight_decay), a.nesterov};
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x)
    step(w[i], momentum ? buf[i] : w[i], g[i], momentum);
}

// Groups: w, m, v, g.
template <class T>
__global__ void adam_kernel(TensorTable<T, 4> table, const int64_t* __restrict__ step_count,
                            const double* __restrict__ lr, AdamAttrs a) {
  __shared__ AdamScalars scalars;
  if (threadIdx.x == 0) scalars = adam_scalars(a, *step_count, *lr);
  __syncthreads();
  const int t = table.tensor_of(blockIdx.x);
  const int64_t begin = (blockIdx.x - table.first_block[t]) * int64_t{kChunk};
  const int64_t end = begin + kChunk < table.numel[t] ? begin + kChunk : table.numel[t];
  T* w = table.ptr[0][t];
  T* m = table.ptr[1][t];
  T* v = table.ptr[2][t];
  const T* g = table.ptr[3][t];
  const AdamStep<T> step(a, scalars);
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) step(w[i], m[i], v[i], g[i]);
}

// Groups: w, v, momentum buffer (when there is momentum), mean gradient (when centered), g.
template <class T, bool Momentum, bool Centered>
__global__ void rmsprop_kernel(TensorTable<T, 3 + Momentum + Centered> table,
                               const double* __restrict__ lr, RmspropAttrs a) {
  constexpr int kGroups = 3 + Momentum + Centered;
  const int t = table.tensor_of(blockIdx.x);
  const int64_t begin = (blockIdx.x - table.first_block[t]) * int64_t{kChunk};
  const int64_t end = begin + kChunk < table.numel[t] ? begin + kChunk : table.numel[t];
  T* w = table.ptr[0][t];
  T* v = table.ptr[1][t];
  T* buf = Momentum ? table.ptr[2][t] : w;
  T* mg = Centered ? table.ptr[2 + Momentum][t] : w;
  const T* g = table.ptr[kGroups - 1][t];
  const RmspropStep<T> step(a, *lr);
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x)
    step(w[i], v[i], Momentum ? buf[i] : w[i], Centered ? mg[i] : w[i], g[i], Momentum, Centered);
}

// Calls launch(table, blocks) for every chunk of up to kTensors parameters of dtype T.
// `group_start[k]` is the input index of the first tensor of group k.
template <class T, int Groups, class Launch>
void for_each_table(const KernelCtx& c, int n, const char* op, Launch launch) {
  TensorTable<T, Groups> table{};
  int64_t blocks = 0;
  auto flush = [&] {
    if (table.count == 0) return;
    table.first_block[table.count] = blocks;
    ENCORE_CHECK(blocks < (int64_t{1} << 31), UnsupportedError, "[", op,
                 "] parameters too large for one launch");
    launch(table, static_cast<unsigned>(blocks));
    ENCORE_CUDA_LAUNCH_CHECK(op);
    table = {};
    blocks = 0;
  };
  for (int p = 0; p < n; ++p) {
    const TensorRef& param = c.in[p];
    if (param.dtype != dtype_of<T>::value || param.numel() == 0) continue;
    for (int k = 0; k < Groups; ++k)
      ENCORE_CHECK(c.in[k * n + p].contiguous(), ValueError, "[", op, "] tensor ", k * n + p,
                   " of shape ", c.in[k * n + p].shape.str(), " must be contiguous");
    const int t = table.count++;
    for (int k = 0; k < Groups; ++k) table.ptr[k][t] = c.in[k * n + p].ptr<T>();
    table.numel[t] = param.numel();
    table.first_block[t] = blocks;
    blocks += (param.numel() + kChunk - 1) / kChunk;
    if (table.count == kTensors) flush();
  }
  flush();
}

void sgd_update(const KernelCtx& c) {
  const OnDevice dev(c);
  const auto& a = c.attrs.as<SgdAttrs>();
  const bool momentum = a.momentum > 0;
  const int n = (static_cast<int>(c.in.size()) - 1) / (momentum ? 3 : 2);
  const double* lr = c.in.back().ptr<const double>();
  for (DType dt : {DType::Float32, DType::Float64}) {
    visit_float(dt, [&]<class T>() {
      if (momentum)
        for_each_table<T, 3>(c, n, "sgd_update", [&](const TensorTable<T, 3>& t, unsigned blocks) {
          sgd_kernel<T, 3><<<blocks, kBlock, 0, dev.stream()>>>(t, lr, a);
        });
      else
        for_each_table<T, 2>(c, n, "sgd_update", [&](const TensorTable<T, 2>& t, unsigned blocks) {
          sgd_kernel<T, 2><<<blocks, kBlock, 0, dev.stream()>>>(t, lr, a);
        });
    });
  }
}

void adam_update(const KernelCtx& c) {
  const OnDevice dev(c);
  const auto& a = c.attrs.as<AdamAttrs>();
  const int n = (static_cast<int>(c.in.size()) - 2) / 4;
  const int64_t* step = c.in[c.in.size() - 2].ptr<const int64_t>();
  const double* lr = c.in.back().ptr<const double>();
  for (DType dt : {DType::Float32, DType::Float64}) {
    visit_float(dt, [&]<class T>() {
      for_each_table<T, 4>(c, n, "adam_update", [&](const TensorTable<T, 4>& t, unsigned blocks) {
        adam_kernel<T><<<blocks, kBlock, 0, dev.stream()>>>(t, step, lr, a);
      });
    });
  }
}

template <class T, bool Momentum, bool Centered>
void rmsprop_launch(const KernelCtx& c, int n, const double* lr, const RmspropAttrs& a,
                    cudaStream_t stream) {
  constexpr int kGroups = 3 + Momentum + Centered;
  for_each_table<T, kGroups>(
      c, n, "rmsprop_update", [&](const TensorTable<T, kGroups>& t, unsigned blocks) {
        rmsprop_kernel<T, Momentum, Centered><<<blocks, kBlock, 0, stream>>>(t, lr, a);
      });
}

void rmsprop_update(const KernelCtx& c) {
  const OnDevice dev(c);
  const auto& a = c.attrs.as<RmspropAttrs>();
  const bool momentum = a.momentum > 0;
  const int n = (static_cast<int>(c.in.size()) - 1) / (3 + momentum + a.centered);
  const double* lr = c.in.back().ptr<const double>();
  for (DType dt : {DType::Float32, DType::Float64}) {
    visit_float(dt, [&]<class T>() {
      if (momentum && a.centered)
        rmsprop_launch<T, true, true>(c, n, lr, a, dev.stream());
      else if (momentum)
        rmsprop_launch<T, true, false>(c, n, lr, a, dev.stream());
      else if (a.centered)
        rmsprop_launch<T, false, true>(c, n, lr, a, dev.stream());
      else
        rmsprop_launch<T, false, false>(c, n, lr, a, dev.stream());
    });
  }
}

}  // namespace

const bool kRegistered = register_cuda_kernels({
    {"sgd_update", sgd_update},
    {"adam_update", adam_update},
    {"rmsprop_update", rmsprop_update},
});

}  // namespace encore::cuda
