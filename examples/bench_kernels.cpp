// Encore's Dense and Conv1D kernels against cuBLAS and cuDNN called directly, on the same
// shapes, in the same run, on the same stream. Each row is one GEMM or convolution: the median
// time per call of encore's op (eager through the public op API, and replayed from a traced
// function) and of the bare library call, and encore / library. The goal is a ratio within 1.1.
// The algorithm columns say what each side ran, so that a gap can be told apart as a different
// cuDNN algorithm or as work around the call (dispatch, encore's weight transpose).
//
//   bench_kernels [--iters 200] [--repeats 7] [--tf32] [--autotune heuristic|exhaustive|off]
//                 [--json out.json]
//
// Shapes: the small model's Conv1D(128, kernel 40, strides 4, 'same') on (32, 140, 30) and its
// Dense(64) and Dense(1), a 1024^3 GEMM, and the medium LSTM's recurrent GEMM
// (32, 512) x (512, 2048); every GEMM also as the two GEMMs of its backward pass.
#include <cstdio>
#include <exception>
#include <functional>

#include "common.h"
#include "core/cuda/check.h"
#include "core/cuda/handles.h"
#include "core/cuda/runtime.h"
#include "encore.h"
#include "graph/trace.h"
#include "ops/autotune.h"
#include "ops/conv.h"
#include "ops/cuda/cudnn_descriptors.h"
#include "ops/dispatch.h"
#include "ops/matrix_layout.h"

using namespace encore;

namespace {

constexpr const char* kOp = "bench_kernels";
const Device kGpu = Device::cuda(0);

std::string dims(std::initializer_list<int64_t> d) {
  std::string s = "(";
  for (int64_t v : d) {
    if (s.size() > 1) s += ',';
    s += std::to_string(v);
  }
  return s + ")";
}

double max_diff(const Tensor& a, const Tensor& b) { return encore::max(encore::abs(a - b)).item(); }

// Median over `repeats` of the mean time per call of `iters` back-to-back calls, between two
// events on encore's compute stream (where the library handles run too). The candidates take
// turns within each repeat so that clock drift hits them alike. The warm-up calls take encore's
// algorithm search, tracing and graph capture, and the libraries' lazy loading out of the
// measurement. Calls are not synchronized one by one: where a call's host side is slower than
// its kernel, that shows, as it would in a training step.
struct Timer {
  int iters, repeats;
  cudaStream_t stream = cuda::stream(0);
  cuda::Event start = cuda::make_event(true), stop = cuda::make_event(true);

  std::vector<double> us(const std::vector<std::function<void()>>& fs) const {
    for (const auto& f : fs)
      for (int i = 0; i < std::max(iters / 10, 3); ++i) f();
    std::vector<std::vector<double>> times(fs.size());
    for (int r = 0; r < repeats; ++r)
      for (size_t c = 0; c < fs.size(); ++c) {
        ENCORE_CUDA_CHECK(kOp, cudaStreamSynchronize(stream));
        ENCORE_CUDA_CHECK(kOp, cudaEventRecord(start.get(), stream));
        for (int i = 0; i < iters; ++i) fs[c]();
        ENCORE_CUDA_CHECK(kOp, cudaEventRecord(stop.get(), stream));
        ENCORE_CUDA_CHECK(kOp, cudaEventSynchronize(stop.get()));
        float ms = 0;
        ENCORE_CUDA_CHECK(kOp, cudaEventElapsedTime(&ms, start.get(), stop.get()));
        times[c].push_back(ms * 1e3 / iters);
      }
    std::vector<double> medians;
    for (auto& t : times) medians.push_back(examples::median(t));
    return medians;
  }
};

// ---- cuDNN on its own ------------------------------------------------------------------

enum class Pass { Forward, BackwardData, BackwardFilter };
constexpr const char* kPassOp[] = {"conv1d", "conv1d_backward_data", "conv1d_backward_filter"};
constexpr const char* kPassName[] = {"fwd", "bwd data", "bwd filter"};

// cuDNN's enum order.
constexpr const char* kFwdAlgos[] = {
    "IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING",
    "WINOGRAD",      "WINOGRAD_NONFUSED"};
constexpr const char* kDataAlgos[] = {"ALGO_0",     "ALGO_1",   "FFT",
                                      "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
constexpr const char* kFilterAlgos[] = {
    "ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD", "WINOGRAD_NONFUSED", "FFT_TILING"};

constexpr const char* kMath[] = {"default", "tensor_op", "tensor_op_allow_conversion", "fma"};

struct ConvShape {
  int64_t n, length, channels, filters, kernel, stride, pad, out_length;
};

// One convolution pass as a cuDNN user would write it: data NHWC with H = 1 (encore's layout
// too), the filter in cuDNN's NHWC (F, 1, K, C), which encore does not share (it keeps Keras's
// (K, C, F) and transposes on each call: part of what encore's column pays). The algorithm is
// cuDNN's first choice from the search encore's autotune policy also uses (timed with Find
// under `exhaustive`, the _v7 heuristics otherwise); math is FMA unless TF32 is allowed.
class CudnnConv {
 public:
  CudnnConv(cudnnHandle_t h, Pass pass, const ConvShape& s, bool tf32, bool find)
      : h_(h), pass_(pass), tf32_(tf32) {
    auto i = [](int64_t v) { return static_cast<int>(v); };
    ENCORE_CUDA_CHECK(kOp, cudnnSetTensor4dDescriptor(x_.get(), CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT,
                                                      i(s.n), i(s.channels), 1, i(s.length)));
    ENCORE_CUDA_CHECK(kOp, cudnnSetTensor4dDescriptor(y_.get(), CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT,
                                                      i(s.n), i(s.filters), 1, i(s.out_length)));
    ENCORE_CUDA_CHECK(kOp, cudnnSetFilter4dDescriptor(w_.get(), CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC,
                                                      i(s.filters), i(s.channels), 1, i(s.kernel)));
    ENCORE_CUDA_CHECK(
        kOp, cudnnSetConvolution2dDescriptor(conv_.get(), 0, i(s.pad), 1, i(s.stride), 1, 1,
                                             CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    ENCORE_CUDA_CHECK(
        kOp, cudnnSetConvolutionMathType(conv_.get(), tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
    int count = 0;
    switch (pass) {
      case Pass::Forward: {
        cudnnConvolutionFwdAlgoPerf_t p[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        ENCORE_CUDA_CHECK(kOp, (find ? cudnnFindConvolutionForwardAlgorithm
                                     : cudnnGetConvolutionForwardAlgorithm_v7)(
                                   h, x_.get(), w_.get(), conv_.get(), y_.get(),
                                   CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, p));
        pick(p, count, kFwdAlgos);
        break;
      }
      case Pass::BackwardData: {
        cudnnConvolutionBwdDataAlgoPerf_t p[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        ENCORE_CUDA_CHECK(kOp, (find ? cudnnFindConvolutionBackwardDataAlgorithm
                                     : cudnnGetConvolutionBackwardDataAlgorithm_v7)(
                                   h, w_.get(), y_.get(), conv_.get(), x_.get(),
                                   CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count, p));
        pick(p, count, kDataAlgos);
        break;
      }
      case Pass::BackwardFilter: {
        cudnnConvolutionBwdFilterAlgoPerf_t p[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        ENCORE_CUDA_CHECK(kOp, (find ? cudnnFindConvolutionBackwardFilterAlgorithm
                                     : cudnnGetConvolutionBackwardFilterAlgorithm_v7)(
                                   h, x_.get(), y_.get(), conv_.get(), w_.get(),
                                   CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, p));
        pick(p, count, kFilterAlgos);
        break;
      }
    }
  }

  // Inputs in the order of encore's op: (x, w), (gy, w) or (x, gy); w as (F, K, C).
  void run(const void* a, const void* b, void* out) const {
    const float one = 1, zero = 0;
    void* ws = workspace_.data();
    const size_t wsb = workspace_.size();
    switch (pass_) {
      case Pass::Forward:
        ENCORE_CUDA_CHECK(
            kOp, cudnnConvolutionForward(h_, &one, x_.get(), a, w_.get(), b, conv_.get(),
                                         static_cast<cudnnConvolutionFwdAlgo_t>(algo_), ws, wsb,
                                         &zero, y_.get(), out));
        break;
      case Pass::BackwardData:
        ENCORE_CUDA_CHECK(
            kOp, cudnnConvolutionBackwardData(h_, &one, w_.get(), b, y_.get(), a, conv_.get(),
                                              static_cast<cudnnConvolutionBwdDataAlgo_t>(algo_), ws,
                                              wsb, &zero, x_.get(), out));
        break;
      case Pass::BackwardFilter:
        ENCORE_CUDA_CHECK(
            kOp, cudnnConvolutionBackwardFilter(h_, &one, x_.get(), a, y_.get(), b, conv_.get(),
                                                static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo_),
                                                ws, wsb, &zero, w_.get(), out));
        break;
    }
  }
  const std::string& algorithm() const { return name_; }

 private:
  cudnnStatus_t workspace_size(int algo, size_t* bytes) const {
    switch (pass_) {
      case Pass::Forward:
        return cudnnGetConvolutionForwardWorkspaceSize(
            h_, x_.get(), w_.get(), conv_.get(), y_.get(),
            static_cast<cudnnConvolutionFwdAlgo_t>(algo), bytes);
      case Pass::BackwardData:
        return cudnnGetConvolutionBackwardDataWorkspaceSize(
            h_, w_.get(), y_.get(), conv_.get(), x_.get(),
            static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), bytes);
      case Pass::BackwardFilter:
        return cudnnGetConvolutionBackwardFilterWorkspaceSize(
            h_, x_.get(), y_.get(), conv_.get(), w_.get(),
            static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), bytes);
    }
    return CUDNN_STATUS_BAD_PARAM;
  }

  // The best-ranked result that cuDNN accepts back with its math type and a workspace size.
  template <class Perf, size_t N>
  void pick(const Perf* perf, int count, const char* const (&names)[N]) {
    for (int r = 0; r < count; ++r) {
      const int algo = static_cast<int>(perf[r].algo);
      const cudnnMathType_t math = tf32_ ? perf[r].mathType : CUDNN_FMA_MATH;
      size_t bytes = 0;
      if (perf[r].status != CUDNN_STATUS_SUCCESS || algo >= static_cast<int>(N) ||
          cudnnSetConvolutionMathType(conv_.get(), math) != CUDNN_STATUS_SUCCESS ||
          workspace_size(algo, &bytes) != CUDNN_STATUS_SUCCESS)
        continue;
      algo_ = algo;
      workspace_ = cuda::DeviceBuffer(bytes, 0);
      name_ = std::string(names[algo]) + "/" + (math < 4 ? kMath[math] : "?");
      return;
    }
    throw BackendError(std::string("[") + kOp + "] cuDNN offers no algorithm for " +
                       kPassOp[static_cast<int>(pass_)]);
  }

  cudnnHandle_t h_;
  Pass pass_;
  bool tf32_;
  cuda::TensorDescriptor x_, y_;
  cuda::FilterDescriptor w_;
  cuda::ConvolutionDescriptor conv_;
  int algo_ = 0;
  cuda::DeviceBuffer workspace_;
  std::string name_;
};

// What encore's autotune store says it chose for `op` (this run benchmarks one conv shape).
std::string encore_algorithm(const char* op) {
  std::string found = "?";
  for (const autotune::Entry& e : autotune::entries())
    if (e.backend == "cudnn" && e.op == op) found = e.algorithm + "/" + e.math;
  return found;
}

// ---- the benchmark ---------------------------------------------------------------------

struct Gemm {
  std::string layer, pass;
  int64_t m, k, n;
  bool ta, tb;  // operand stored transposed: A as (k, m), B as (n, k)
};

struct Bench {
  Timer timer;
  bool tf32;
  cublasHandle_t cublas;
  cudnnHandle_t cudnn;
  std::vector<examples::Row> rows = {};
  int within = 0, within_traced = 0;

  // Times encore eager, encore traced and the library, and adds the row.
  void measure(const std::string& kernel, const std::string& shape,
               const std::function<Tensor()>& op, const std::function<void()>& library,
               const std::function<Tensor()>& library_result, const std::string& encore_algo,
               const std::string& library_algo) {
    // Operands are captured, so a replay is one graph launch with nothing but the op in it.
    auto traced = trace(op, {.name = kernel, .alias_outputs = true});
    const auto us = timer.us({[&] { (void)op(); }, [&] { (void)traced(); }, library});
    const double diff = max_diff(op(), library_result());
    within += us[0] <= 1.1 * us[2];
    within_traced += us[1] <= 1.1 * us[2];
    rows.push_back(examples::Row()
                       .add("kernel", kernel)
                       .add("shape", shape)
                       .add("encore_us", us[0])
                       .add("library_us", us[2])
                       .add("ratio", us[0] / us[2])
                       .add("traced_us", us[1])
                       .add("traced_ratio", us[1] / us[2])
                       .add("encore_algo", encore_algo)
                       .add("library_algo", library_algo)
                       .add("max_abs_diff", diff));
  }

  void gemm(const Gemm& g) {
    const Tensor a = normal(g.ta ? Shape{g.k, g.m} : Shape{g.m, g.k}, 0, 1, DType::Float32, kGpu);
    const Tensor b = normal(g.tb ? Shape{g.n, g.k} : Shape{g.k, g.n}, 0, 1, DType::Float32, kGpu);
    const Tensor opa = g.ta ? a.transpose(0, 1) : a, opb = g.tb ? b.transpose(0, 1) : b;
    const Tensor c = Tensor::empty({g.m, g.n}, DType::Float32, kGpu);
    const int m = static_cast<int>(g.m), k = static_cast<int>(g.k), n = static_cast<int>(g.n);
    const float *pa = a.data<float>(), *pb = b.data<float>();
    float* pc = c.data<float>();
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: B first, each operand
    // passed as it lies in memory. Transpose flags and leading dimensions come from the rule
    // encore's kernel applies, so both sides make the same request even where a degenerate
    // dimension (Dense(1)) would allow another.
    const MatrixLayout la = matrix_layout(opa.shape(), opa.strides()),
                       lb = matrix_layout(opb.shape(), opb.strides());
    auto library = [=, h = cublas] {
      const float one = 1, zero = 0;
      ENCORE_CUDA_CHECK(
          kOp, cublasSgemm(h, lb.transposed ? CUBLAS_OP_T : CUBLAS_OP_N,
                           la.transposed ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &one, pb,
                           static_cast<int>(lb.ld), pa, static_cast<int>(la.ld), &zero, pc, n));
    };
    const std::string shape = (g.ta ? dims({g.k, g.m}) + "^T" : dims({g.m, g.k})) + " x " +
                              (g.tb ? dims({g.n, g.k}) + "^T" : dims({g.k, g.n}));
    measure(
        g.layer + " " + g.pass, shape, [&] { return matmul(opa, opb); }, library, [&] { return c; },
        tf32 ? "cuBLAS/tf32" : "cuBLAS", tf32 ? "cublasSgemm/tf32" : "cublasSgemm");
  }

  void conv(const ConvShape& s, bool find) {
    const Tensor x = normal({s.n, s.length, s.channels}, 0, 1, DType::Float32, kGpu);
    const Tensor w = normal({s.kernel, s.channels, s.filters}, 0, 1, DType::Float32, kGpu);
    const Tensor gy = normal({s.n, s.out_length, s.filters}, 0, 1, DType::Float32, kGpu);
    const Tensor w_fkc = w.permute({2, 0, 1}).contiguous();
    const Attrs attrs = ConvAttrs{s.stride, 1, s.pad, s.pad, s.length, s.kernel};
    const std::string shape = "x" + dims({s.n, s.length, s.channels}) + " w" +
                              dims({s.kernel, s.channels, s.filters}) + " stride " +
                              std::to_string(s.stride) + " pad " + std::to_string(s.pad);
    const Tensor lib_in[3][2] = {{x, w_fkc}, {gy, w_fkc}, {x, gy}};
    const Tensor lib_out[3] = {
        Tensor::empty({s.n, s.out_length, s.filters}, DType::Float32, kGpu),
        Tensor::empty({s.n, s.length, s.channels}, DType::Float32, kGpu),
        Tensor::empty({s.filters, s.kernel, s.channels}, DType::Float32, kGpu)};
    const std::function<Tensor()> ops[3] = {
        [&] { return conv1d(x, w, s.stride, Padding::same()); },
        [&] {
          return call(op("conv1d_backward_data"), {gy, w}, attrs);
        },
        [&] {
          return call(op("conv1d_backward_filter"), {x, gy}, attrs);
        }};
    for (int p = 0; p < 3; ++p) {
      const CudnnConv lib(cudnn, static_cast<Pass>(p), s, tf32, find);
      const void *a = lib_in[p][0].data_ptr(), *b = lib_in[p][1].data_ptr();
      void* out = lib_out[p].data_ptr();
      (void)ops[p]();  // encore chooses its algorithm on first use; the name is read below
      measure(
          "Conv1D(" + std::to_string(s.filters) + ") " + kPassName[p], shape, ops[p],
          [&] { lib.run(a, b, out); },
          // cuDNN's filter gradient is (F, K, C); encore's (K, C, F).
          [&] {
            return p == 2 ? lib_out[p].permute({1, 2, 0}) : lib_out[p];
          },
          encore_algorithm(kPassOp[p]), lib.algorithm());
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  const examples::Args args(argc, argv);
  if (!cuda_available()) {
    std::printf("no CUDA device: nothing to measure\n");
    return 0;
  }
  try {
    const bool tf32 = args.flag("tf32");
    set_allow_tf32(tf32);
    if (args.flag("autotune")) autotune::set_policy(autotune::parse_policy(args.get("autotune")));
    const bool find = autotune::policy() == autotune::Policy::Exhaustive;

    cublasHandle_t cublas = nullptr;
    ENCORE_CUDA_CHECK(kOp, cublasCreate(&cublas));
    const cuda::CublasHandle cublas_owner(cublas);
    ENCORE_CUDA_CHECK(kOp, cublasSetStream(cublas, cuda::stream(0)));
    ENCORE_CUDA_CHECK(
        kOp, cublasSetMathMode(cublas, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    cudnnHandle_t cudnn = nullptr;
    ENCORE_CUDA_CHECK(kOp, cudnnCreate(&cudnn));
    const cuda::CudnnHandle cudnn_owner(cudnn);
    ENCORE_CUDA_CHECK(kOp, cudnnSetStream(cudnn, cuda::stream(0)));

    Bench bench{
        Timer{static_cast<int>(args.num("iters", 200)), static_cast<int>(args.num("repeats", 7))},
        tf32, cublas, cudnn};
    manual_seed(0);

    // Conv1D(128, kernel 40, strides 4, 'same') on (32, 140, 30). cuDNN pads symmetrically,
    // which 'same' is here (18 each side), so both sides compute the very same convolution.
    const auto [pad_l, pad_r] = window_padding("conv1d", 140, 40, 4, 1, Padding::same());
    ENCORE_CHECK(pad_l == pad_r, ValueError, "[", kOp, "] the conv shape needs even padding");
    bench.conv({32, 140, 30, 128, 40, 4, pad_l, (140 + 2 * pad_l - 40) / 4 + 1}, find);

    // Each layer's forward GEMM and the two of its backward pass: dW = x^T g, dx = g W^T.
    struct Layer {
      const char* name;
      int64_t batch, in, out;
    };
    for (const Layer& l :
         {Layer{"Dense(64)", 32, 128, 64}, Layer{"Dense(1)", 32, 64, 1},
          Layer{"GEMM 1024", 1024, 1024, 1024}, Layer{"LSTM(512) recurrent", 32, 512, 2048}}) {
      bench.gemm({l.name, "fwd x.W", l.batch, l.in, l.out, false, false});
      bench.gemm({l.name, "dW x^T.g", l.in, l.batch, l.out, true, false});
      bench.gemm({l.name, "dx g.W^T", l.batch, l.out, l.in, false, true});
    }

    examples::print_table(bench.rows);
    std::printf(
        "within 10%% of the library: eager %d/%zu, traced %d/%zu (float32%s, autotune %s)\n",
        bench.within, bench.rows.size(), bench.within_traced, bench.rows.size(),
        tf32 ? ", TF32 allowed" : "", std::string(autotune::name(autotune::policy())).c_str());
    if (args.flag("json")) examples::write_json(args.get("json"), bench.rows);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
