// Reductions (sum, max) over an axes bitmask. A whole-tensor reduction of dense data, and long
// dense rows, go through CUB (DeviceReduce / DeviceSegmentedReduce). Everything else goes
// through one general kernel: the kept and the reduced index spaces map onto the two axes of
// a thread block (reduced lanes fastest when the reduced axis is the contiguous one, so loads
// coalesce either way), and a long reduction with few outputs is split over blocks, whose
// partial results the same kernel reduces again. float32 accumulates in float, int32 in int64.
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <cub/device/device_reduce.cuh>
#include <cub/device/device_segmented_reduce.cuh>
#include <limits>
#include <memory>

#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.h"
#include "ops/functors.h"
#include "ops/reduce.h"

namespace encore::cuda {
namespace {

template <class T> using Acc = std::conditional_t<std::is_same_v<T, int32_t>, int64_t, T>;

// Heterogeneous operands: CUB also applies the op to (init, input) of different types.
// Integer sums wrap, as on the CPU.
struct SumOp {
  template <class A, class B> __host__ __device__ __forceinline__ auto operator()(A a, B b) const {
    using C = decltype(a + b);
    return fn::wrap_add(static_cast<C>(a), static_cast<C>(b));
  }
  template <class A> static A identity() { return A(0); }
};
// NaN never wins, as in the CPU kernel.
// Starts from -inf and propagates NaN (wherever it is in the order CUB combines), as on the CPU.
struct MaxOp {
  template <class A, class B> __host__ __device__ __forceinline__ auto operator()(A a, B b) const {
    return a < b || b != b ? b : a;
  }
  template <class A> static A identity() {
    using L = std::numeric_limits<A>;
    return L::has_infinity ? -L::infinity() : L::lowest();
  }
};

template <class A> struct ToAcc {
  template <class T> __host__ __device__ __forceinline__ A operator()(T x) const {
    return static_cast<A>(x);
  }
};

struct RowStart {
  int64_t row;
  __host__ __device__ __forceinline__ int64_t operator()(int64_t i) const { return i * row; }
};

// An index space: dims in row-major enumeration order, with their strides in the input.
struct Axes {
  int ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t stride[kMaxDims] = {};

  void push(int64_t size, int64_t st) {
    if (ndim > 0 && stride[ndim - 1] == st * size) {
      shape[ndim - 1] *= size;
      stride[ndim - 1] = st;
      return;
    }
    shape[ndim] = size;
    stride[ndim] = st;
    ++ndim;
  }
  int64_t numel() const {
    int64_t n = 1;
    for (int d = 0; d < ndim; ++d) n *= shape[d];
    return n;
  }
  bool dense(int64_t st) const { return ndim == 0 || (ndim == 1 && stride[0] == st); }

  template <class Index> __device__ __forceinline__ int64_t offset(Index i) const {
    int64_t off = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      const Index size = static_cast<Index>(shape[d]);
      off += static_cast<int64_t>(i % size) * stride[d];
      i /= size;
    }
    return off;
  }
};

template <class Op, class TIn, class TOut, class A, class Index>
__global__ void reduce_general(const TIn* __restrict__ x, TOut* __restrict__ y, Axes kept,
                               Axes reduced, Index n_out, Index n_red, Index chunk,
                               bool reduce_fast, A init, Op op) {
  extern __shared__ __align__(16) unsigned char smem[];
  A* partial = reinterpret_cast<A*>(smem);
  const unsigned tr = reduce_fast ? threadIdx.x : threadIdx.y,
                 nr = reduce_fast ? blockDim.x : blockDim.y;
  const unsigned to = reduce_fast ? threadIdx.y : threadIdx.x,
                 no = reduce_fast ? blockDim.y : blockDim.x;
  const Index o = static_cast<Index>(blockIdx.x) * no + to;
  const Index begin = static_cast<Index>(blockIdx.y) * chunk;
  const Index end = begin + chunk < n_red ? begin + chunk : n_red;
  A acc = init;
  if (o < n_out) {
    const TIn* base = x + kept.offset(o);
    for (Index r = begin + tr; r < end; r += nr)
      acc = op(acc, static_cast<A>(base[reduced.offset(r)]));
  }
  partial[to * nr + tr] = acc;
  __syncthreads();
  for (unsigned s = nr / 2; s > 0; s /= 2) {
    if (tr < s) partial[to * nr + tr] = op(partial[to * nr + tr], partial[to * nr + tr + s]);
    __syncthreads();
  }
  if (tr == 0 && o < n_out)
    y[static_cast<int64_t>(blockIdx.y) * n_out + o] = static_cast<TOut>(partial[to * nr]);
}

template <class T> __global__ void fill_value(T* y, int64_t n, T v) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = v;
}

unsigned pow2_at_least(int64_t n) {
  unsigned p = 1;
  while (p < 256 && p < n) p *= 2;
  return p;
}

// How one reduction runs: decided from geometry alone (no data), so that a PrepareFn can size
// the scratch buffer a later call of the kernel uses.
struct ReducePlan {
  enum Path { Nothing, Fill, CubAll, CubRows, General } path = Nothing;
  Axes kept, reduced;
  int64_t n_out = 0, n_red = 0;
  bool reduce_fast = false;
  dim3 block;
  int64_t splits = 1, chunk = 0;
  size_t scratch = 0;  // CUB temp storage, or the partial results of a split reduction
};

// Rows this long are worth a CUB block each; shorter ones go to the general kernel, which
// packs several rows into a block.
constexpr int64_t kCubRow = 4096;

template <class Op, class T>
ReducePlan plan_reduce(const TensorRef& x, uint32_t axes, const char* op, int device,
                       cudaStream_t stream) {
  using A = Acc<T>;
  ReducePlan p;
  for (int d = 0; d < x.shape.size(); ++d) {
    if (x.shape[d] == 1) continue;
    (axes >> d & 1u ? p.reduced : p.kept).push(x.shape[d], x.strides[d]);
  }
  p.n_out = p.kept.numel();
  p.n_red = p.reduced.numel();
  if (p.n_out == 0) return p;
  if (p.n_red == 0) {
    p.path = ReducePlan::Fill;
    return p;
  }
  const T* in = x.ptr<const T>();
  const auto acc_in = thrust::make_transform_iterator(in, ToAcc<A>{});
  if (p.reduced.dense(1) && p.kept.ndim == 0) {
    p.path = ReducePlan::CubAll;
    ENCORE_CUDA_CHECK(
        op, cub::DeviceReduce::Reduce(nullptr, p.scratch, acc_in, static_cast<T*>(nullptr), p.n_red,
                                      Op{}, Op::template identity<A>(), stream));
    return p;
  }
  if (p.reduced.dense(1) && p.kept.dense(p.n_red) && p.n_red >= kCubRow) {
    p.path = ReducePlan::CubRows;
    const auto starts = thrust::make_transform_iterator(thrust::make_counting_iterator<int64_t>(0),
                                                        RowStart{p.n_red});
    ENCORE_CUDA_CHECK(op, cub::DeviceSegmentedReduce::Reduce(
                              nullptr, p.scratch, acc_in, static_cast<T*>(nullptr), p.n_out, starts,
                              starts + 1, Op{}, Op::template identity<A>(), stream));
    return p;
  }
  p.path = ReducePlan::General;
  p.reduce_fast = p.reduced.ndim > 0 && p.reduced.stride[p.reduced.ndim - 1] == 1 &&
                  !(p.kept.ndim > 0 && p.kept.stride[p.kept.ndim - 1] == 1);
  unsigned nr, no;
  if (p.reduce_fast) {
    nr = pow2_at_least(p.n_red);
    no = kBlock / nr;
    p.block = dim3(nr, no);
  } else {
    no = std::min(32u, pow2_at_least(p.n_out));
    nr = kBlock / no;
    p.block = dim3(no, nr);
  }
  const int64_t blocks = (p.n_out + no - 1) / no;
  ENCORE_CHECK(blocks < (int64_t{1} << 31), UnsupportedError, "[", op, "] ", p.n_out,
               " outputs are too many for one launch");
  // Few output blocks for a long reduction: split it so that every SM gets work.
  const int64_t target = 4 * int64_t{multiprocessor_count(device)};
  if (blocks < target && p.n_red > int64_t{16} * nr) {
    const int64_t by_work = p.n_red / (int64_t{16} * nr);
    p.splits = std::clamp<int64_t>(std::min((target + blocks - 1) / blocks, by_work), 1, 65535);
  }
  p.chunk = (p.n_red + p.splits - 1) / p.splits;
  p.splits = (p.n_red + p.chunk - 1) / p.chunk;
  if (p.splits > 1) p.scratch = static_cast<size_t>(p.splits * p.n_out) * sizeof(A);
  return p;
}

template <class Op, class TIn, class TOut, class A>
void launch_general(const TIn* x, TOut* y, const Axes& kept, const Axes& reduced, int64_t n_out,
                    int64_t n_red, int64_t splits, int64_t chunk, bool reduce_fast, dim3 block,
                    cudaStream_t stream) {
  const unsigned no = reduce_fast ? block.y : block.x;
  const dim3 grid(static_cast<unsigned>((n_out + no - 1) / no), static_cast<unsigned>(splits));
  const size_t shared = size_t{block.x} * block.y * sizeof(A);
  const A init = Op::template identity<A>();
  if (small_index(n_out) && small_index(n_red))
    reduce_general<Op, TIn, TOut, A, uint32_t><<<grid, block, shared, stream>>>(
        x, y, kept, reduced, static_cast<uint32_t>(n_out), static_cast<uint32_t>(n_red),
        static_cast<uint32_t>(chunk), reduce_fast, init, Op{});
  else
    reduce_general<Op, TIn, TOut, A, uint64_t><<<grid, block, shared, stream>>>(
        x, y, kept, reduced, static_cast<uint64_t>(n_out), static_cast<uint64_t>(n_red),
        static_cast<uint64_t>(chunk), reduce_fast, init, Op{});
}

template <class Op, class T>
void run_reduce(const ReducePlan& p, const TensorRef& x, const TensorRef& y, void* scratch,
                const char* op, cudaStream_t stream) {
  using A = Acc<T>;
  const T* in = x.ptr<const T>();
  T* out = y.ptr<T>();
  const auto acc_in = thrust::make_transform_iterator(in, ToAcc<A>{});
  size_t bytes = p.scratch;
  switch (p.path) {
    case ReducePlan::Nothing:
      return;
    case ReducePlan::Fill:
      fill_value<T><<<grid_for(p.n_out), kBlock, 0, stream>>>(
          out, p.n_out, static_cast<T>(Op::template identity<A>()));
      break;
    case ReducePlan::CubAll:
      ENCORE_CUDA_CHECK(op, cub::DeviceReduce::Reduce(scratch, bytes, acc_in, out, p.n_red, Op{},
                                                      Op::template identity<A>(), stream));
      break;
    case ReducePlan::CubRows: {
      const auto starts = thrust::make_transform_iterator(
          thrust::make_counting_iterator<int64_t>(0), RowStart{p.n_red});
      ENCORE_CUDA_CHECK(op, cub::DeviceSegmentedReduce::Reduce(scratch, bytes, acc_in, out, p.n_out,
                                                               starts, starts + 1, Op{},
                                                               Op::template identity<A>(), stream));
      break;
    }
    case ReducePlan::General:
      if (p.splits == 1) {
        launch_general<Op, T, T, A>(in, out, p.kept, p.reduced, p.n_out, p.n_red, 1, p.n_red,
                                    p.reduce_fast, p.block, stream);
        break;
      }
      // Partials [split][output], then a column reduction of them into the output.
      launch_general<Op, T, A, A>(in, static_cast<A*>(scratch), p.kept, p.reduced, p.n_out, p.n_red,
                                  p.splits, p.chunk, p.reduce_fast, p.block, stream);
      ENCORE_CUDA_LAUNCH_CHECK(op);
      {
        Axes kept, rows;
        kept.push(p.n_out, 1);
        rows.push(p.splits, p.n_out);
        const unsigned no = std::min(32u, pow2_at_least(p.n_out));
        launch_general<Op, A, T, A>(static_cast<const A*>(scratch), out, kept, rows, p.n_out,
                                    p.splits, 1, p.splits, false, dim3(no, kBlock / no), stream);
      }
      break;
  }
  ENCORE_CUDA_LAUNCH_CHECK(op);
}

struct ReduceState {
  DeviceBuffer scratch;
};

template <class R> std::shared_ptr<void> prepare_reduce(const KernelCtx& c) {
  const OnDevice dev(c);
  const uint32_t axes = c.attrs.as<ReduceAttrs>().axes;
  auto state = std::make_shared<ReduceState>();
  visit_dtype(c.in[0].dtype, [&]<class T>() {
    const ReducePlan p = plan_reduce<R, T>(c.in[0], axes, c.op, dev.device(), dev.stream());
    if (p.scratch > 0) state->scratch = DeviceBuffer(p.scratch, dev.device());
  });
  return state;
}

template <class R> void reduce_kernel(const KernelCtx& c) {
  const OnDevice dev(c);
  const uint32_t axes = c.attrs.as<ReduceAttrs>().axes;
  visit_dtype(c.in[0].dtype, [&]<class T>() {
    const ReducePlan p = plan_reduce<R, T>(c.in[0], axes, c.op, dev.device(), dev.stream());
    DeviceBuffer temp;
    void* scratch = nullptr;
    if (p.scratch > 0) {
      if (const auto* state = static_cast<const ReduceState*>(c.state)) {
        ENCORE_CHECK(state->scratch.size() >= p.scratch, BackendError, "[", c.op,
                     "] the prepared scratch buffer does not fit this call");
        scratch = state->scratch.data();
      } else {
        temp = DeviceBuffer(p.scratch, dev.device());
        scratch = temp.data();
      }
    }
    run_reduce<R, T>(p, c.in[0], c.out[0], scratch, c.op, dev.stream());
  });
}

}  // namespace

const bool kRegistered = register_cuda_kernels({
    {"sum", reduce_kernel<SumOp>, prepare_reduce<SumOp>},
    {"max", reduce_kernel<MaxOp>, prepare_reduce<MaxOp>},
});

}  // namespace encore::cuda
