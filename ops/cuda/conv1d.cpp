// conv1d, conv1d_backward_data and conv1d_backward_filter on cuDNN (legacy convolution API),
// channels-last: data (N, L, C) is an NHWC tensor with H = 1 and W = L, so activations are
// never transposed.
//
// Two things cuDNN cannot read directly, handled in scratch buffers owned by the prepared
// state (eager calls take them from the stream-ordered pool):
//  - Our kernel layout (K, C, F) has the output channel fastest. cuDNN's filter formats are
//    NCHW (F, C, 1, K) and NHWC (F, 1, K, C): both have F slowest, so no descriptor reads our
//    layout. The weights are transposed to (F, K, C) (NHWC, "KRSC") by a strided copy, and
//    backward_filter's result is transposed back.
//  - cuDNN pads symmetrically. With pad_l != pad_r (Keras 'same' when the total is odd),
//    pad_l on both sides is exact whenever it yields the same output length (the extra or
//    missing zeros on the right are then never read). Otherwise the input is padded
//    explicitly by the difference: x_pad = [pad_l - p zeros, x, pad_r - p zeros] with
//    p = min(pad_l, pad_r) done by cuDNN; backward_data crops its result back.
//
// Algorithm choice per shape goes through the autotune store (ops/autotune.h).
#include "ops/cuda/conv1d.h"

#include <algorithm>
#include <climits>
#include <memory>

#include "core/ledger.h"
#include "core/modes.h"
#include "ops/autotune.h"
#include "ops/conv.h"
#include "ops/cuda/copy.h"
#include "ops/cuda/cudnn_descriptors.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.h"

namespace encore::cuda {
namespace {

enum class ConvKind : uint8_t { Forward, BackwardData, BackwardFilter };
constexpr const char* kOpNames[] = {"conv1d", "conv1d_backward_data", "conv1d_backward_filter"};

constexpr const char* kForwardAlgos[] = {
    "IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING",
    "WINOGRAD",      "WINOGRAD_NONFUSED"};
constexpr const char* kBackwardDataAlgos[] = {"ALGO_0",     "ALGO_1",   "FFT",
                                              "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
constexpr const char* kBackwardFilterAlgos[] = {
    "ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD", "WINOGRAD_NONFUSED", "FFT_TILING"};
static_assert(std::size(kForwardAlgos) == CUDNN_CONVOLUTION_FWD_ALGO_COUNT);
static_assert(std::size(kBackwardDataAlgos) == CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT);
static_assert(std::size(kBackwardFilterAlgos) == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT);

std::span<const char* const> algo_names(ConvKind k) {
  switch (k) {
    case ConvKind::Forward:
      return kForwardAlgos;
    case ConvKind::BackwardData:
      return kBackwardDataAlgos;
    case ConvKind::BackwardFilter:
      return kBackwardFilterAlgos;
  }
  return {};
}

// The fixed algorithms of the `off` policy: the general-purpose implicit-GEMM kernels.
int default_algo(ConvKind k) {
  switch (k) {
    case ConvKind::Forward:
      return CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
    case ConvKind::BackwardData:
      return CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
    case ConvKind::BackwardFilter:
      return CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;
  }
  return 0;
}

const char* math_name(cudnnMathType_t m) {
  switch (m) {
    case CUDNN_DEFAULT_MATH:
      return "default";
    case CUDNN_TENSOR_OP_MATH:
      return "tensor_op";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION:
      return "tensor_op_allow_conversion";
    case CUDNN_FMA_MATH:
      return "fma";
  }
  return "?";
}

cudnnMathType_t parse_math(const std::string& s) {
  for (cudnnMathType_t m : {CUDNN_DEFAULT_MATH, CUDNN_TENSOR_OP_MATH,
                            CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION, CUDNN_FMA_MATH})
    if (s == math_name(m)) return m;
  return CUDNN_FMA_MATH;
}

// The user's problem; everything a plan depends on.
struct ConvProblem {
  ConvKind kind;
  bool tf32;
  int device;
  int64_t n, length, channels, filters, kernel, out_length, stride, dilation, pad_l, pad_r;
  bool operator==(const ConvProblem&) const = default;

  // cuDNN's symmetric view of it: `pad` zeros on both sides of an input that has `extra_l`
  // and `extra_r` zero steps added explicitly.
  int64_t pad = 0, extra_l = 0, extra_r = 0;
  void resolve_padding() {
    const int64_t span = dilation * (kernel - 1) + 1;
    const int64_t sym = length + 2 * pad_l - span;
    if (pad_l == pad_r || (sym >= 0 && sym / stride + 1 == out_length)) {
      pad = pad_l;
    } else {
      pad = std::min(pad_l, pad_r);
      extra_l = pad_l - pad;
      extra_r = pad_r - pad;
    }
  }
  bool explicit_padding() const { return extra_l != 0 || extra_r != 0; }
  int64_t padded_length() const { return length + extra_l + extra_r; }
  ConvGeometry shape() const {
    return {n, length, channels, filters, kernel, out_length, stride, dilation, pad_l};
  }
};

// Tensors of one call by role: x (N, L, C), w (K, C, F), y (N, Lout, F); for the backward ops
// the gradients take the place of what they are the gradient of.
struct Roles {
  const TensorRef *x, *w, *y;
};

Roles roles(ConvKind k, const KernelCtx& c) {
  switch (k) {
    case ConvKind::Forward:
      return {&c.in[0], &c.in[1], &c.out[0]};
    case ConvKind::BackwardData:
      return {&c.out[0], &c.in[1], &c.in[0]};
    case ConvKind::BackwardFilter:
      return {&c.in[0], &c.out[0], &c.in[1]};
  }
  return {};
}

ConvProblem problem_of(ConvKind kind, const KernelCtx& c) {
  const auto& a = c.attrs.as<ConvAttrs>();
  const Roles r = roles(kind, c);
  ConvProblem p{kind,          allow_tf32(),  device_of(c),  r.x->shape[0], r.x->shape[1],
                r.x->shape[2], r.w->shape[2], r.w->shape[0], r.y->shape[1], a.stride,
                a.dilation,    a.pad_l,       a.pad_r};
  p.resolve_padding();
  return p;
}

// Descriptors and the chosen algorithm for one problem. Immutable once built: a change of
// policy, a load or a clear makes new plans, while prepared states keep the one (and the
// workspace) they were built with.
struct ConvPlan {
  ConvProblem problem;
  TensorDescriptor x, y;
  FilterDescriptor w;
  ConvolutionDescriptor conv;
  int algo = 0;
  cudnnMathType_t math = CUDNN_FMA_MATH;
  size_t workspace = 0;

  size_t filter_bytes() const {
    return static_cast<size_t>(problem.kernel * problem.channels * problem.filters) * sizeof(float);
  }
  size_t padded_bytes() const {
    return problem.explicit_padding()
               ? static_cast<size_t>(problem.n * problem.padded_length() * problem.channels) *
                     sizeof(float)
               : 0;
  }
};

int as_int(const ConvProblem& p, int64_t v) {
  ENCORE_CHECK(v <= INT_MAX, UnsupportedError, "[", kOpNames[static_cast<int>(p.kind)], "] size ",
               v, " exceeds cuDNN's 32-bit limit");
  return static_cast<int>(v);
}

void set_descriptors(ConvPlan& plan) {
  const ConvProblem& p = plan.problem;
  const char* op = kOpNames[static_cast<int>(p.kind)];
  const int64_t lp = p.padded_length();
  as_int(p, p.n * lp * p.channels);
  as_int(p, p.n * p.out_length * p.filters);
  ENCORE_CUDA_CHECK(
      op, cudnnSetTensor4dDescriptor(plan.x.get(), CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT,
                                     as_int(p, p.n), as_int(p, p.channels), 1, as_int(p, lp)));
  ENCORE_CUDA_CHECK(op, cudnnSetTensor4dDescriptor(
                            plan.y.get(), CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, as_int(p, p.n),
                            as_int(p, p.filters), 1, as_int(p, p.out_length)));
  ENCORE_CUDA_CHECK(op, cudnnSetFilter4dDescriptor(plan.w.get(), CUDNN_DATA_FLOAT,
                                                   CUDNN_TENSOR_NHWC, as_int(p, p.filters),
                                                   as_int(p, p.channels), 1, as_int(p, p.kernel)));
  ENCORE_CUDA_CHECK(op, cudnnSetConvolution2dDescriptor(
                            plan.conv.get(), 0, as_int(p, p.pad), 1, as_int(p, p.stride), 1,
                            as_int(p, p.dilation), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  int n = 0, c = 0, h = 0, w = 0;
  ENCORE_CUDA_CHECK(op, cudnnGetConvolution2dForwardOutputDim(plan.conv.get(), plan.x.get(),
                                                              plan.w.get(), &n, &c, &h, &w));
  ENCORE_CHECK(n == p.n && c == p.filters && h == 1 && w == p.out_length, BackendError, "[", op,
               "] cuDNN computes an output of (", n, ", ", w, ", ", c, ") where (", p.n, ", ",
               p.out_length, ", ", p.filters, ") is expected");
}

struct Perf {
  int algo;
  cudnnStatus_t status;
  float time;
  size_t memory;
  cudnnMathType_t math;
  bool deterministic;
};

template <class R> std::vector<Perf> to_perf(const R* results, int count) {
  std::vector<Perf> out;
  for (int i = 0; i < count; ++i)
    out.push_back({static_cast<int>(results[i].algo), results[i].status, results[i].time,
                   results[i].memory, results[i].mathType,
                   results[i].determinism == CUDNN_DETERMINISTIC});
  return out;
}

cudnnStatus_t workspace_size(const ConvPlan& plan, int algo, size_t* bytes) {
  const cudnnHandle_t h = cudnn(plan.problem.device);
  switch (plan.problem.kind) {
    case ConvKind::Forward:
      return cudnnGetConvolutionForwardWorkspaceSize(
          h, plan.x.get(), plan.w.get(), plan.conv.get(), plan.y.get(),
          static_cast<cudnnConvolutionFwdAlgo_t>(algo), bytes);
    case ConvKind::BackwardData:
      return cudnnGetConvolutionBackwardDataWorkspaceSize(
          h, plan.w.get(), plan.y.get(), plan.conv.get(), plan.x.get(),
          static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), bytes);
    case ConvKind::BackwardFilter:
      return cudnnGetConvolutionBackwardFilterWorkspaceSize(
          h, plan.x.get(), plan.y.get(), plan.conv.get(), plan.w.get(),
          static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), bytes);
  }
  return CUDNN_STATUS_BAD_PARAM;
}

std::vector<Perf> heuristics(const ConvPlan& plan) {
  const cudnnHandle_t h = cudnn(plan.problem.device);
  const char* op = kOpNames[static_cast<int>(plan.problem.kind)];
  int count = 0;
  switch (plan.problem.kind) {
    case ConvKind::Forward: {
      cudnnConvolutionFwdAlgoPerf_t r[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
      ENCORE_CUDA_CHECK(op, cudnnGetConvolutionForwardAlgorithm_v7(
                                h, plan.x.get(), plan.w.get(), plan.conv.get(), plan.y.get(),
                                CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, r));
      return to_perf(r, count);
    }
    case ConvKind::BackwardData: {
      cudnnConvolutionBwdDataAlgoPerf_t r[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
      ENCORE_CUDA_CHECK(op, cudnnGetConvolutionBackwardDataAlgorithm_v7(
                                h, plan.w.get(), plan.y.get(), plan.conv.get(), plan.x.get(),
                                CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count, r));
      return to_perf(r, count);
    }
    case ConvKind::BackwardFilter: {
      cudnnConvolutionBwdFilterAlgoPerf_t r[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
      ENCORE_CUDA_CHECK(op, cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                                h, plan.x.get(), plan.y.get(), plan.conv.get(), plan.w.get(),
                                CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, r));
      return to_perf(r, count);
    }
  }
  return {};
}

// Times every algorithm on scratch buffers of the problem's size (their contents do not matter
// for timing; searching on the op's own buffers could clobber data a Plan's arena shares).
std::vector<Perf> exhaustive(const ConvPlan& plan, size_t workspace_limit) {
  const ConvProblem& p = plan.problem;
  const char* op = kOpNames[static_cast<int>(p.kind)];
  const cudnnHandle_t h = cudnn(p.device);
  size_t workspace = 0;
  for (int a = 0; a < static_cast<int>(algo_names(p.kind).size()); ++a) {
    size_t bytes = 0;
    if (workspace_size(plan, a, &bytes) == CUDNN_STATUS_SUCCESS && bytes <= workspace_limit)
      workspace = std::max(workspace, bytes);
  }
  DeviceBuffer x(static_cast<size_t>(p.n * p.padded_length() * p.channels) * sizeof(float),
                 p.device);
  DeviceBuffer w(plan.filter_bytes(), p.device);
  DeviceBuffer y(static_cast<size_t>(p.n * p.out_length * p.filters) * sizeof(float), p.device);
  DeviceBuffer ws(workspace, p.device);
  int count = 0;
  switch (p.kind) {
    case ConvKind::Forward: {
      cudnnConvolutionFwdAlgoPerf_t r[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
      ENCORE_CUDA_CHECK(
          op, cudnnFindConvolutionForwardAlgorithmEx(
                  h, plan.x.get(), x.data(), plan.w.get(), w.data(), plan.conv.get(), plan.y.get(),
                  y.data(), CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, r, ws.data(), workspace));
      return to_perf(r, count);
    }
    case ConvKind::BackwardData: {
      cudnnConvolutionBwdDataAlgoPerf_t r[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
      ENCORE_CUDA_CHECK(op, cudnnFindConvolutionBackwardDataAlgorithmEx(
                                h, plan.w.get(), w.data(), plan.y.get(), y.data(), plan.conv.get(),
                                plan.x.get(), x.data(), CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                                &count, r, ws.data(), workspace));
      return to_perf(r, count);
    }
    case ConvKind::BackwardFilter: {
      cudnnConvolutionBwdFilterAlgoPerf_t r[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
      ENCORE_CUDA_CHECK(op, cudnnFindConvolutionBackwardFilterAlgorithmEx(
                                h, plan.x.get(), x.data(), plan.y.get(), y.data(), plan.conv.get(),
                                plan.w.get(), w.data(), CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
                                &count, r, ws.data(), workspace));
      return to_perf(r, count);
    }
  }
  return {};
}

// Sets (algo, math) on the plan if cuDNN supports them for this problem within `limit`.
bool try_algo(ConvPlan& plan, int algo, cudnnMathType_t math, size_t limit) {
  if (algo < 0 || algo >= static_cast<int>(algo_names(plan.problem.kind).size())) return false;
  // Without TF32, float32 runs on FMA units whatever the search reported (as in PyTorch).
  if (!plan.problem.tf32) math = CUDNN_FMA_MATH;
  if (cudnnSetConvolutionMathType(plan.conv.get(), math) != CUDNN_STATUS_SUCCESS) return false;
  size_t bytes = 0;
  if (workspace_size(plan, algo, &bytes) != CUDNN_STATUS_SUCCESS || bytes > limit) return false;
  plan.algo = algo;
  plan.math = math;
  plan.workspace = bytes;
  return true;
}

std::string key_of(const ConvProblem& p) {
  return detail::cat("N=", p.n, " L=", p.length, " C=", p.channels, " F=", p.filters,
                     " K=", p.kernel, " stride=", p.stride, " dilation=", p.dilation, " pad=(",
                     p.pad_l, ", ", p.pad_r, ") float32 ", p.tf32 ? "tf32" : "no-tf32", " ",
                     device_model(p.device));
}

int parse_algo(ConvKind kind, const std::string& name) {
  const auto names = algo_names(kind);
  for (size_t i = 0; i < names.size(); ++i)
    if (name == names[i]) return static_cast<int>(i);
  return -1;
}

void choose_algorithm(ConvPlan& plan) {
  const ConvProblem& p = plan.problem;
  const char* op = kOpNames[static_cast<int>(p.kind)];
  const std::string key = key_of(p);
  const size_t free_bytes = free_memory(p.device);
  const size_t limit = free_bytes > 0 ? free_bytes / 2 : size_t{1} << 30;
  // The dispatcher's cache of prepared states counts and times this setup; a choice stored
  // earlier (this process, or a loaded file) spares the search.
  if (const auto e = autotune::detail::find(op, key))
    if (try_algo(plan, parse_algo(p.kind, e->algorithm), parse_math(e->math), SIZE_MAX)) {
      autotune::detail::note_reused();
      return;
    }
  const autotune::Policy policy = autotune::policy();
  ENCORE_CUDA_CHECK(op, cudnnSetConvolutionMathType(plan.conv.get(),
                                                    p.tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
  double time_ms = -1;
  bool chosen = false;
  if (policy == autotune::Policy::Off)
    chosen = try_algo(plan, default_algo(p.kind), CUDNN_DEFAULT_MATH, SIZE_MAX);
  if (!chosen) {
    std::vector<Perf> perfs;
    if (policy == autotune::Policy::Exhaustive) {
      try {
        perfs = exhaustive(plan, limit);
      } catch (const OutOfMemoryError&) {
        perfs.clear();  // not enough memory to time them all: fall back to the heuristics
      }
    }
    if (perfs.empty()) perfs = heuristics(plan);
    // Deterministic algorithms first, in cuDNN's order: some backward algorithms accumulate
    // with atomics, and their results would differ bit for bit between runs and between an
    // eager step and its replay.
    for (bool deterministic_only : {true, false}) {
      for (const Perf& perf : perfs) {
        if (perf.status != CUDNN_STATUS_SUCCESS || (deterministic_only && !perf.deterministic) ||
            !try_algo(plan, perf.algo, perf.math, limit))
          continue;
        if (policy == autotune::Policy::Exhaustive) time_ms = perf.time;
        chosen = true;
        break;
      }
      if (chosen) break;
    }
  }
  // Every search came back empty-handed: any algorithm cuDNN accepts, whatever its workspace.
  for (int a = 0; !chosen && a < static_cast<int>(algo_names(p.kind).size()); ++a)
    chosen = try_algo(plan, a, CUDNN_DEFAULT_MATH, SIZE_MAX);
  ENCORE_CHECK(chosen, BackendError, "[", op, "] cuDNN supports no algorithm for ", key);
  autotune::Entry e;
  e.op = op;
  e.key = key;
  e.algorithm = algo_names(p.kind)[plan.algo];
  e.time_ms = time_ms;
  e.workspace_bytes = plan.workspace;
  e.backend = "cudnn";
  e.source = std::string(autotune::name(policy));
  e.math = math_name(plan.math);
  autotune::detail::store(std::move(e));
}

// What a call needs beyond its tensors; a prepared state owns it for the Plan's lifetime.
struct ConvState {
  std::shared_ptr<const ConvPlan> plan;
  DeviceBuffer workspace, filter, padded;
};

ConvState make_state(const ConvProblem& problem) {
  ConvState s;
  auto plan = std::make_shared<ConvPlan>();
  plan->problem = problem;
  set_descriptors(*plan);
  choose_algorithm(*plan);
  s.plan = std::move(plan);
  const int device = problem.device;
  s.workspace = DeviceBuffer(s.plan->workspace, device);
  s.filter = DeviceBuffer(s.plan->filter_bytes(), device);
  s.padded = DeviceBuffer(s.plan->padded_bytes(), device);
  return s;
}

// (K, C, F) view of a (F, K, C) buffer.
TensorRef kcf_view(void* data, const ConvProblem& p) {
  return {data, Shape{p.kernel, p.channels, p.filters},
          Strides{p.channels, 1, p.kernel * p.channels}, DType::Float32, Device::cuda(p.device)};
}

// (N, L, C) view of the data steps inside the explicitly padded buffer.
TensorRef unpadded_view(void* data, const ConvProblem& p) {
  const int64_t lp = p.padded_length();
  TensorRef padded{data, Shape{p.n, lp, p.channels}, Strides{lp * p.channels, p.channels, 1},
                   DType::Float32, Device::cuda(p.device)};
  return sub_view(padded, 1, p.extra_l, Shape{p.n, p.length, p.channels});
}

void run_cudnn(ConvKind kind, const Roles& r, const ConvState& s, cudaStream_t stream) {
  const ConvPlan& plan = *s.plan;
  const ConvProblem& p = plan.problem;
  const char* op = kOpNames[static_cast<int>(kind)];
  const cudnnHandle_t h = cudnn(p.device);
  const float one = 1.0f, zero = 0.0f;
  // cudnnSetConvolutionMathType is not needed here: the plan's descriptor already carries it.
  if (kind != ConvKind::BackwardFilter)
    strided_copy(kcf_view(s.filter.data(), p), *r.w, stream, op);
  const void* x = r.x->data;
  if (p.explicit_padding() && kind != ConvKind::BackwardData) {
    ENCORE_CUDA_CHECK(op, cudaMemsetAsync(s.padded.data(), 0, plan.padded_bytes(), stream));
    strided_copy(unpadded_view(s.padded.data(), p), *r.x, stream, op);
    x = s.padded.data();
  }
  switch (kind) {
    case ConvKind::Forward:
      ENCORE_CUDA_CHECK(
          op, cudnnConvolutionForward(
                  h, &one, plan.x.get(), x, plan.w.get(), s.filter.data(), plan.conv.get(),
                  static_cast<cudnnConvolutionFwdAlgo_t>(plan.algo), s.workspace.data(),
                  plan.workspace, &zero, plan.y.get(), r.y->data));
      break;
    case ConvKind::BackwardData: {
      void* gx = p.explicit_padding() ? s.padded.data() : r.x->data;
      ENCORE_CUDA_CHECK(
          op, cudnnConvolutionBackwardData(
                  h, &one, plan.w.get(), s.filter.data(), plan.y.get(), r.y->data, plan.conv.get(),
                  static_cast<cudnnConvolutionBwdDataAlgo_t>(plan.algo), s.workspace.data(),
                  plan.workspace, &zero, plan.x.get(), gx));
      if (p.explicit_padding()) strided_copy(*r.x, unpadded_view(s.padded.data(), p), stream, op);
      break;
    }
    case ConvKind::BackwardFilter:
      ENCORE_CUDA_CHECK(
          op, cudnnConvolutionBackwardFilter(
                  h, &one, plan.x.get(), x, plan.y.get(), r.y->data, plan.conv.get(),
                  static_cast<cudnnConvolutionBwdFilterAlgo_t>(plan.algo), s.workspace.data(),
                  plan.workspace, &zero, plan.w.get(), s.filter.data()));
      strided_copy(*r.w, kcf_view(s.filter.data(), p), stream, op);
      break;
  }
}

// Nothing for cuDNN to do (it rejects zero-size descriptors); the same cases as the CPU kernel.
bool empty(const ConvProblem& p) {
  return p.n == 0 || p.length == 0 || p.out_length == 0 || p.filters == 0 || p.channels == 0 ||
         p.kernel == 0;
}

// Runs the chosen algorithm once on zeroed scratch tensors, on the capture stream through the
// capture's cuDNN handle (a CaptureScope warm-up, joined to the compute stream): whatever cuDNN
// sets up lazily on a handle's first execution then happens while the Plan is built, on the
// handle its capture uses, and not inside the capture.
void warm_up(ConvKind kind, const ConvState& s) {
  const ConvProblem& p = s.plan->problem;
  const Device dev = Device::cuda(p.device);
  const Shape xs{p.n, p.length, p.channels}, ws{p.kernel, p.channels, p.filters},
      ys{p.n, p.out_length, p.filters};
  DeviceBuffer xb(xs.numel() * sizeof(float), p.device), wb(ws.numel() * sizeof(float), p.device),
      yb(ys.numel() * sizeof(float), p.device);
  for (const DeviceBuffer* b : {&xb, &wb, &yb})
    if (b->size() > 0)
      ENCORE_CUDA_CHECK(kOpNames[static_cast<int>(kind)],
                        cudaMemsetAsync(b->data(), 0, b->size(), stream(p.device)));
  const TensorRef x{xb.data(), xs, contiguous_strides(xs), DType::Float32, dev},
      w{wb.data(), ws, contiguous_strides(ws), DType::Float32, dev},
      y{yb.data(), ys, contiguous_strides(ys), DType::Float32, dev};
  // Declared after the buffers: it ends (the compute stream waits for the warm-up) before they
  // are freed on the compute stream.
  CaptureScope scope(p.device, CaptureScope::Mode::WarmUp);
  scope.set_op(kOpNames[static_cast<int>(kind)]);
  run_cudnn(kind, {&x, &w, &y}, s, scope.stream());
}

template <ConvKind Kind> std::shared_ptr<void> prepare(const KernelCtx& c) {
  if (c.in[0].dtype != DType::Float32) return nullptr;
  const OnDevice dev(c);
  const ConvProblem p = problem_of(Kind, c);
  if (empty(p)) return nullptr;
  auto state = std::make_shared<ConvState>(make_state(p));
  warm_up(Kind, *state);
  return state;
}

template <ConvKind Kind> void kernel(const KernelCtx& c) {
  const OnDevice dev(c);
  const ConvProblem p = problem_of(Kind, c);
  if (empty(p)) {
    // Nothing to convolve: gradients of empty problems are zeros.
    const TensorRef& out = c.out[0];
    if (out.numel() > 0)
      ENCORE_CUDA_CHECK(
          kOpNames[static_cast<int>(Kind)],
          cudaMemsetAsync(out.data, 0, out.numel() * itemsize(out.dtype), dev.stream()));
    return;
  }
  if (c.in[0].dtype == DType::Float64) {
    const Roles r = roles(Kind, c);
    const ConvGeometry s = p.shape();
    if constexpr (Kind == ConvKind::Forward)
      conv1d_direct(s, r.x->ptr<const double>(), r.w->ptr<const double>(), r.y->ptr<double>(),
                    dev.stream());
    else if constexpr (Kind == ConvKind::BackwardData)
      conv1d_backward_data_direct(s, r.y->ptr<const double>(), r.w->ptr<const double>(),
                                  r.x->ptr<double>(), dev.stream());
    else
      conv1d_backward_filter_direct(s, r.x->ptr<const double>(), r.y->ptr<const double>(),
                                    r.w->ptr<double>(), dev.stream());
    return;
  }
  const auto* state = static_cast<const ConvState*>(c.state);
  ConvProblem same = p;
  same.tf32 = state->plan->problem.tf32;  // a prepared plan keeps the math mode it was built with
  ENCORE_CHECK(state->plan->problem == same, BackendError, "[", kOpNames[static_cast<int>(Kind)],
               "] called with a prepared state made for another shape");
  run_cudnn(Kind, roles(Kind, c), *state, dev.stream());
}

// The convolution, then bias and activation by one elementwise kernel (cuDNN's fused
// convolution-bias-activation has no tanh or sigmoid; this keeps the CPU's semantics).
void fused_kernel(const KernelCtx& c) {
  kernel<ConvKind::Forward>(c);
  const OnDevice dev(c);
  const TensorRef& y = c.out[0];
  const int64_t filters = y.shape[2];
  visit_float(y.dtype, [&]<class T>() {
    bias_activation(y.ptr<T>(), c.in[2].ptr<const T>(), y.numel() / std::max<int64_t>(filters, 1),
                    filters, c.attrs.as<ConvAttrs>().activation, dev.stream());
  });
}

}  // namespace

const bool kRegistered = register_cuda_kernels({
    {"conv1d", kernel<ConvKind::Forward>, prepare<ConvKind::Forward>},
    {"conv1d_fused", fused_kernel, prepare<ConvKind::Forward>},
    {"conv1d_backward_data", kernel<ConvKind::BackwardData>, prepare<ConvKind::BackwardData>},
    {"conv1d_backward_filter", kernel<ConvKind::BackwardFilter>, prepare<ConvKind::BackwardFilter>},
});

}  // namespace encore::cuda
