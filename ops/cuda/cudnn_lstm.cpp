// The cuDNN RNN fast path: cudnn_lstm runs a whole unidirectional LSTM sequence in one op, and
// cudnn_lstm_backward its gradients. These ops exist only in CUDA builds, so this file defines
// their OpDefs completely (shape inference, backward, kernels).
//
// Semantics are Keras' and those of lstm_cell (ops/cpu/nn.cpp): gates (i, f, c, o),
// z_t = x_t W + h_{t-1} R + b, activation tanh, recurrent activation sigmoid (cuDNN's only
// LSTM). cuDNN keeps its own weight space, one matrix per gate:
//  - cudnnGetRNNWeightParams(pseudoLayer 0, linLayerID 0..3) are the input matrices of gates
//    i, f, c (cuDNN's "new memory" gate) and o, linLayerID 4..7 the recurrent ones, in the
//    same gate order as Keras. Each is reported as a {1, rows = hidden, cols = input} tensor:
//    row u holds the weights producing gate unit u, so element (u, ch) of input matrix g is our
//    W[ch, g * U + u] (a transposed block), and likewise R[j, g * U + u] for recurrent ones.
//    The layout is read back from the returned descriptors (dims and strides), and a different
//    one is an error rather than a silent mismatch.
//  - Keras has one bias: it goes into the input bias of each gate (the bias vectors of
//    linLayerID 0..3); the recurrent biases (4..7) stay zero (CUDNN_RNN_DOUBLE_BIAS).
// The weights are copied into the weight space by one small kernel on every call, and the
// gradients unpacked the same way, so W, R and b stay ordinary parameters.
#include "ops/cuda/cudnn_lstm.h"

#include <climits>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/modes.h"
#include "ops/cuda/cudnn_descriptors.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.h"
#include "ops/dispatch.h"
#include "ops/ops.h"
#include "ops/nn.h"

namespace encore::cuda {
namespace {

struct LstmKey {
  int device;
  int64_t batch, steps, input, units;
  bool tf32;
  bool operator==(const LstmKey&) const = default;
};

struct LstmKeyHash {
  size_t operator()(const LstmKey& k) const {
    size_t h = static_cast<size_t>(k.device) * 2 + k.tf32;
    for (int64_t v : {k.batch, k.steps, k.input, k.units})
      h = h * 1000003u ^ static_cast<size_t>(v);
    return h;
  }
};

// Where one matrix or bias lives in the weight space.
struct WeightSlot {
  int64_t offset, rows, cols, row_stride, col_stride;
};

// Descriptors, sizes and the weight-space layout of one problem. Immutable once built.
struct LstmSetup {
  LstmKey key;
  DropoutDescriptor dropout;
  DeviceBuffer dropout_states;
  RnnDescriptor rnn;
  RnnDataDescriptor x, y;
  TensorDescriptor h;  // also describes c: (layers = 1, batch, units)
  size_t weight_bytes = 0, work_bytes = 0, reserve_bytes = 0;
  WeightSlot matrices[8], biases[4];  // matrices: input gates i, f, c, o, then recurrent ones
  DeviceBuffer seq_lengths;           // batch x int32, all `steps`
};

int as_int(int64_t v) {
  ENCORE_CHECK(v >= 1 && v <= INT_MAX, UnsupportedError, "[cudnn_lstm] size ", v,
               " is outside cuDNN's range");
  return static_cast<int>(v);
}

WeightSlot read_slot(cudnnTensorDescriptor_t desc, const void* base, const void* addr, int64_t rows,
                     int64_t cols, const char* what, int id) {
  cudnnDataType_t type;
  int nb = 0, dims[3] = {}, strides[3] = {};
  ENCORE_CUDA_CHECK("cudnn_lstm", cudnnGetTensorNdDescriptor(desc, 3, &type, &nb, dims, strides));
  const ptrdiff_t bytes = static_cast<const char*>(addr) - static_cast<const char*>(base);
  ENCORE_CHECK(type == CUDNN_DATA_FLOAT && nb == 3 && dims[0] == 1 && dims[1] == rows &&
                   dims[2] == cols && bytes >= 0 && bytes % sizeof(float) == 0,
               BackendError, "[cudnn_lstm] cuDNN reports ", what, " ", id, " as (", dims[0], ", ",
               dims[1], ", ", dims[2], ") at byte ", bytes, "; expected (1, ", rows, ", ", cols,
               ")");
  return {static_cast<int64_t>(bytes / sizeof(float)), rows, cols, strides[1], strides[2]};
}

std::shared_ptr<LstmSetup> make_setup(const LstmKey& k) {
  auto s = std::make_shared<LstmSetup>();
  s->key = k;
  const OnDevice dev(k.device);
  const cudnnHandle_t h = cudnn(k.device);
  // No dropout inside a single layer; cuDNN still wants a descriptor. With rate 0 it needs no
  // random states; should this cuDNN insist, give it some.
  if (cudnnSetDropoutDescriptor(s->dropout.get(), h, 0.0f, nullptr, 0, 0) != CUDNN_STATUS_SUCCESS) {
    size_t state_bytes = 0;
    ENCORE_CUDA_CHECK("cudnn_lstm", cudnnDropoutGetStatesSize(h, &state_bytes));
    s->dropout_states = DeviceBuffer(state_bytes, k.device);
    ENCORE_CUDA_CHECK("cudnn_lstm",
                      cudnnSetDropoutDescriptor(s->dropout.get(), h, 0.0f, s->dropout_states.data(),
                                                state_bytes, 0));
  }
  const int batch = as_int(k.batch), steps = as_int(k.steps), input = as_int(k.input),
            units = as_int(k.units);
  as_int(k.batch * k.steps * std::max(k.input, k.units));
  auto describe_rnn = [&](cudnnMathType_t math) {
    return cudnnSetRNNDescriptor_v8(s->rnn.get(), CUDNN_RNN_ALGO_STANDARD, CUDNN_LSTM,
                                    CUDNN_RNN_DOUBLE_BIAS, CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT,
                                    CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, math, input, units, units,
                                    1, s->dropout.get(), CUDNN_RNN_PADDED_IO_ENABLED);
  };
  // Without TF32, FMA math keeps float32 exact; should this cuDNN refuse FMA for RNNs, its
  // default math is the fallback.
  if (k.tf32 || describe_rnn(CUDNN_FMA_MATH) != CUDNN_STATUS_SUCCESS)
    ENCORE_CUDA_CHECK("cudnn_lstm", describe_rnn(CUDNN_DEFAULT_MATH));
  // Batch-major (B, T, features) is our layout; unpacked layouts need padded I/O enabled above
  // (every sequence here has the full length, so nothing is actually padded).
  const std::vector<int> lengths(batch, steps);
  ENCORE_CUDA_CHECK("cudnn_lstm",
                    cudnnSetRNNDataDescriptor(s->x.get(), CUDNN_DATA_FLOAT,
                                              CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED, steps,
                                              batch, input, lengths.data(), nullptr));
  ENCORE_CUDA_CHECK("cudnn_lstm",
                    cudnnSetRNNDataDescriptor(s->y.get(), CUDNN_DATA_FLOAT,
                                              CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED, steps,
                                              batch, units, lengths.data(), nullptr));
  const int dims[3] = {1, batch, units}, strides[3] = {batch * units, units, 1};
  ENCORE_CUDA_CHECK("cudnn_lstm",
                    cudnnSetTensorNdDescriptor(s->h.get(), CUDNN_DATA_FLOAT, 3, dims, strides));
  ENCORE_CUDA_CHECK("cudnn_lstm", cudnnGetRNNWeightSpaceSize(h, s->rnn.get(), &s->weight_bytes));
  ENCORE_CUDA_CHECK("cudnn_lstm",
                    cudnnGetRNNTempSpaceSizes(h, s->rnn.get(), CUDNN_FWD_MODE_TRAINING, s->x.get(),
                                              &s->work_bytes, &s->reserve_bytes));
  // The layout needs a real weight-space address to report offsets against.
  const DeviceBuffer probe(s->weight_bytes, k.device);
  TensorDescriptor m, b;
  for (int id = 0; id < 8; ++id) {
    void* maddr = nullptr;
    void* baddr = nullptr;
    ENCORE_CUDA_CHECK("cudnn_lstm",
                      cudnnGetRNNWeightParams(h, s->rnn.get(), 0, s->weight_bytes, probe.data(), id,
                                              m.get(), &maddr, b.get(), &baddr));
    s->matrices[id] =
        read_slot(m.get(), probe.data(), maddr, k.units, id < 4 ? k.input : k.units, "matrix", id);
    if (id < 4) s->biases[id] = read_slot(b.get(), probe.data(), baddr, k.units, 1, "bias", id);
  }
  s->seq_lengths = DeviceBuffer(static_cast<size_t>(batch) * sizeof(int32_t), k.device);
  fill_int32(s->seq_lengths.as<int32_t>(), batch, steps, dev.stream());
  return s;
}

// The one per-shape cache outside the dispatcher's: shape inference already needs cuDNN's
// reserve size (an output), before any kernel state exists. Bounded: past 64 shapes it starts
// over (states prepared earlier keep their setups).
std::mutex g_setups_mutex;
std::unordered_map<LstmKey, std::shared_ptr<const LstmSetup>, LstmKeyHash> g_setups;

std::shared_ptr<const LstmSetup> setup_for(const LstmKey& k) {
  std::lock_guard<std::mutex> lock(g_setups_mutex);
  if (g_setups.size() >= 64 && !g_setups.count(k)) g_setups.clear();
  auto& s = g_setups[k];
  if (!s) s = make_setup(k);
  return s;
}

// Our tensors' place in the weight space (see the file comment for the mapping).
LstmSlots slots_for(const LstmSetup& s, float* W, float* R, float* b) {
  const int64_t u4 = 4 * s.key.units, units = s.key.units;
  LstmSlots t;
  auto add = [&](const WeightSlot& w, float* tensor, int64_t t_col) {
    t.slot[t.count++] = {w.offset, w.rows, w.cols, w.row_stride, w.col_stride, tensor, 1, t_col};
  };
  for (int g = 0; g < 4; ++g) {
    add(s.matrices[g], W + g * units, u4);
    add(s.matrices[4 + g], R + g * units, u4);
    add(s.biases[g], b + g * units, 0);
  }
  return t;
}

LstmKey key_of(const TensorRef& x, const TensorRef& h0) {
  return {x.device.index, x.shape[0], x.shape[1], x.shape[2], h0.shape[1], allow_tf32()};
}

// ---- definitions -------------------------------------------------------------------------

void check_lstm_inputs(const char* op, std::span<const Tensor> in, const Attrs& attrs) {
  const auto& a = attrs.as<LstmAttrs>();
  ENCORE_CHECK(a.activation == Activation::Tanh && a.recurrent_activation == Activation::Sigmoid,
               UnsupportedError, "[", op,
               "] cuDNN's LSTM computes activation=tanh, recurrent_activation=sigmoid; got ",
               a.str(), " (use the composed LSTM)");
  const Tensor& x = in[0];
  for (size_t i = 0; i < in.size(); ++i) {
    ENCORE_CHECK(in[i].dtype() == DType::Float32, DTypeError, "[", op,
                 "] needs float32 tensors; input ", i, " is ", describe(in[i]));
    ENCORE_CHECK(in[i].device().is_cuda(), DeviceError, "[", op, "] runs on CUDA devices; input ",
                 i, " is ", describe(in[i]));
  }
  ENCORE_CHECK(x.dim() == 3 && x.shape()[0] >= 1 && x.shape()[1] >= 1 && x.shape()[2] >= 1,
               ShapeError, "[", op, "] input must be (batch, steps >= 1, features), got ",
               x.shape().str());
  const int64_t batch = x.shape()[0], input = x.shape()[2];
  const int64_t units = in[1].dim() == 2 ? in[1].shape()[1] : 0;
  const Shape state{batch, units}, w{input, 4 * units}, r{units, 4 * units}, bias{4 * units};
  ENCORE_CHECK(units >= 1 && in[1].shape() == state && in[2].shape() == state &&
                   in[3].shape() == w && in[4].shape() == r && in[5].shape() == bias,
               ShapeError, "[", op, "] for input ", x.shape().str(),
               " expects h0 and c0 (batch, units), kernel (", input,
               ", 4 * units), recurrent kernel (units, 4 * units) and bias (4 * units); got ",
               in[1].shape().str(), ", ", in[2].shape().str(), ", ", in[3].shape().str(), ", ",
               in[4].shape().str(), ", ", in[5].shape().str());
}

// cudnn_lstm(x, h0, c0, W, R, b) -> (y (B, T, U), hT, cT, reserve)
int infer_cudnn_lstm(const OpDef&, std::span<const Tensor> in, const Attrs& attrs, TensorMeta* out) {
  check_lstm_inputs("cudnn_lstm", in, attrs);
  const Tensor& x = in[0];
  const Device dev = x.device();
  const int64_t units = in[1].shape()[1];
  const auto setup =
      setup_for({dev.index, x.shape()[0], x.shape()[1], x.shape()[2], units, allow_tf32()});
  out[0] = {Shape{x.shape()[0], x.shape()[1], units}, {}, 0, DType::Float32, dev};
  out[1] = out[2] = {in[1].shape(), {}, 0, DType::Float32, dev};
  out[3] = {
      Shape{static_cast<int64_t>((setup->reserve_bytes + 3) / 4)}, {}, 0, DType::Float32, dev};
  return 4;
}

void bw_cudnn_lstm(const BackwardCtx& c, Tensor* g) {
  auto grad = [&](int i) { return c.grads[i].defined() ? c.grads[i] : zeros_like(c.outputs[i]); };
  const Tensor in[] = {c.inputs[0], c.inputs[1], c.inputs[2],  c.inputs[3],
                       c.inputs[4], c.inputs[5], c.outputs[0], c.outputs[3],
                       grad(0),     grad(1),     grad(2)};
  const OutList r = dispatch(op("cudnn_lstm_backward"), in, c.attrs);
  for (int i = 0; i < 6; ++i)
    if (c.need(i)) g[i] = r[i];
}

// cudnn_lstm_backward(x, h0, c0, W, R, b, y, reserve, gy, ghT, gcT) -> (gx, gh0, gc0, gW, gR, gb)
int infer_cudnn_lstm_backward(const OpDef&, std::span<const Tensor> in, const Attrs& attrs, TensorMeta* out) {
  check_lstm_inputs("cudnn_lstm_backward", in.subspan(0, 6), attrs);
  const Tensor& x = in[0];
  const Shape y{x.shape()[0], x.shape()[1], in[1].shape()[1]};
  ENCORE_CHECK(in[6].shape() == y && in[8].shape() == y && in[9].shape() == in[1].shape() &&
                   in[10].shape() == in[1].shape() && in[7].dim() == 1,
               ShapeError, "[cudnn_lstm_backward] outputs and gradients do not match the input ",
               x.shape().str());
  for (int i = 6; i < 11; ++i)
    ENCORE_CHECK(in[i].dtype() == DType::Float32 && in[i].device() == x.device(), DTypeError,
                 "[cudnn_lstm_backward] input ", i, " ", describe(in[i]), " must be float32 on ",
                 x.device().str());
  for (int i = 0; i < 6; ++i) out[i] = {in[i].shape(), {}, 0, DType::Float32, x.device()};
  return 6;
}

// ---- kernels -----------------------------------------------------------------------------

struct LstmState {
  std::shared_ptr<const LstmSetup> setup;
  DeviceBuffer weights, dweights, work;
};

LstmState make_state(const LstmKey& k, bool backward) {
  LstmState s;
  s.setup = setup_for(k);
  s.weights = DeviceBuffer(s.setup->weight_bytes, k.device);
  if (backward) s.dweights = DeviceBuffer(s.setup->weight_bytes, k.device);
  s.work = DeviceBuffer(s.setup->work_bytes, k.device);
  return s;
}

// The prepared state: the dispatcher's cache hands every call one made for its shape.
const LstmState& state_for(const KernelCtx& c, bool backward) {
  const LstmKey k = key_of(c.in[0], c.in[1]);
  const auto* prepared = static_cast<const LstmState*>(c.state);
  LstmKey same = k;
  same.tf32 = prepared->setup->key.tf32;  // a prepared state keeps the math mode it was built with
  ENCORE_CHECK(prepared->setup->key == same, BackendError, "[", backward ? "cudnn_lstm_backward" : "cudnn_lstm",
               "] called with a prepared state made for another shape");
  return *prepared;
}

void check_reserve(const LstmSetup& s, const TensorRef& reserve, const char* op) {
  ENCORE_CHECK(static_cast<size_t>(reserve.numel()) * sizeof(float) >= s.reserve_bytes, ValueError,
               "[", op, "] reserve of ", reserve.numel(), " floats is smaller than the ",
               s.reserve_bytes, " bytes cuDNN needs for this shape");
}

void pack_weights(const LstmState& st, const KernelCtx& c, cudaStream_t stream) {
  const LstmSetup& s = *st.setup;
  // Zero first: padding inside the weight space and the recurrent biases stay 0.
  ENCORE_CUDA_CHECK("cudnn_lstm", cudaMemsetAsync(st.weights.data(), 0, s.weight_bytes, stream));
  move_lstm_weights(slots_for(s, c.in[3].ptr<float>(), c.in[4].ptr<float>(), c.in[5].ptr<float>()),
                    st.weights.as<float>(), true, stream);
}

void forward_kernel(const KernelCtx& c);
void backward_kernel(const KernelCtx& c);

// Runs the op once, with the prepared state, on zeroed scratch tensors: whatever cuDNN sets up
// lazily on first execution then happens while the Plan is built, not inside its capture.
void warm_up(const LstmState& st, const KernelCtx& c, bool backward, cudaStream_t stream) {
  const LstmKey& k = st.setup->key;
  const Device dev = Device::cuda(k.device);
  std::vector<DeviceBuffer> buffers;
  auto scratch = [&](const Shape& shape) {
    buffers.emplace_back(shape.numel() * sizeof(float), k.device);
    if (buffers.back().size() > 0)
      ENCORE_CUDA_CHECK("cudnn_lstm",
                        cudaMemsetAsync(buffers.back().data(), 0, buffers.back().size(), stream));
    return TensorRef{buffers.back().data(), shape, contiguous_strides(shape), DType::Float32, dev};
  };
  buffers.reserve(19);
  const Shape seq_in{k.batch, k.steps, k.input}, seq_out{k.batch, k.steps, k.units},
      state{k.batch, k.units}, w{k.input, 4 * k.units}, r{k.units, 4 * k.units}, b{4 * k.units},
      reserve{static_cast<int64_t>((st.setup->reserve_bytes + 3) / 4)};
  const TensorRef in[] = {scratch(seq_in), scratch(state), scratch(state),
                          scratch(w),      scratch(r),     scratch(b)};
  const TensorRef out[] = {scratch(seq_out), scratch(state), scratch(state), scratch(reserve)};
  forward_kernel(KernelCtx{in, out, c.attrs, const_cast<LstmState*>(&st)});
  if (!backward) return;
  const TensorRef grad_in[] = {
      in[0],          in[1],         in[2], in[3], in[4], in[5], out[0], out[3], scratch(seq_out),
      scratch(state), scratch(state)};
  const TensorRef grad_out[] = {scratch(seq_in), scratch(state), scratch(state),
                                scratch(w),      scratch(r),     scratch(b)};
  backward_kernel(KernelCtx{grad_in, grad_out, c.attrs, const_cast<LstmState*>(&st)});
}

template <bool Backward>
std::shared_ptr<void> prepare(const KernelCtx& c) {
  const OnDevice dev(c);
  auto state = std::make_shared<LstmState>(make_state(key_of(c.in[0], c.in[1]), Backward));
  warm_up(*state, c, Backward, dev.stream());
  return state;
}

void forward_kernel(const KernelCtx& c) {
  const OnDevice dev(c);
  const LstmState& st = state_for(c, false);
  const LstmSetup& s = *st.setup;
  check_reserve(s, c.out[3], "cudnn_lstm");
  pack_weights(st, c, dev.stream());
  ENCORE_CUDA_CHECK(
      "cudnn_lstm",
      cudnnRNNForward(cudnn(dev.device()), s.rnn.get(), CUDNN_FWD_MODE_TRAINING,
                      s.seq_lengths.as<const int32_t>(), s.x.get(), c.in[0].data, s.y.get(),
                      c.out[0].data, s.h.get(), c.in[1].data, c.out[1].data, s.h.get(),
                      c.in[2].data, c.out[2].data, s.weight_bytes, st.weights.data(), s.work_bytes,
                      st.work.data(), s.reserve_bytes, c.out[3].data));
}

void backward_kernel(const KernelCtx& c) {
  const OnDevice dev(c);
  const LstmState& st = state_for(c, true);
  const LstmSetup& s = *st.setup;
  const cudnnHandle_t h = cudnn(dev.device());
  const TensorRef &x = c.in[0], &h0 = c.in[1], &c0 = c.in[2], &y = c.in[6], &reserve = c.in[7];
  check_reserve(s, reserve, "cudnn_lstm_backward");
  pack_weights(st, c, dev.stream());
  // Backward data first: it leaves in the reserve space what backward weights reads.
  ENCORE_CUDA_CHECK(
      "cudnn_lstm_backward",
      cudnnRNNBackwardData_v8(h, s.rnn.get(), s.seq_lengths.as<const int32_t>(), s.y.get(), y.data,
                              c.in[8].data, s.x.get(), c.out[0].data, s.h.get(), h0.data,
                              c.in[9].data, c.out[1].data, s.h.get(), c0.data, c.in[10].data,
                              c.out[2].data, s.weight_bytes, st.weights.data(), s.work_bytes,
                              st.work.data(), s.reserve_bytes, reserve.data));
  // Weight gradients are added into the buffer: start from zero.
  ENCORE_CUDA_CHECK("cudnn_lstm_backward",
                    cudaMemsetAsync(st.dweights.data(), 0, s.weight_bytes, dev.stream()));
  ENCORE_CUDA_CHECK(
      "cudnn_lstm_backward",
      cudnnRNNBackwardWeights_v8(h, s.rnn.get(), CUDNN_WGRAD_MODE_ADD,
                                 s.seq_lengths.as<const int32_t>(), s.x.get(), x.data, s.h.get(),
                                 h0.data, s.y.get(), y.data, s.weight_bytes, st.dweights.data(),
                                 s.work_bytes, st.work.data(), s.reserve_bytes, reserve.data));
  // The input biases' gradient is b's: b feeds only them (the recurrent biases are constant 0).
  move_lstm_weights(
      slots_for(s, c.out[3].ptr<float>(), c.out[4].ptr<float>(), c.out[5].ptr<float>()),
      st.dweights.as<float>(), false, dev.stream());
}

// The examples run the op on random inputs (the table runs them on a GPU only); the backward
// op's runs through autograd.
Outputs lstm_example(std::span<const Tensor> x) {
  const OutList r = dispatch(op("cudnn_lstm"), x, LstmAttrs{Activation::Tanh, Activation::Sigmoid});
  return {r[0], r[1], r[2]};
}
Outputs lstm_backward_example(std::span<const Tensor> x) {
  std::vector<Tensor> in;
  for (const Tensor& t : x) in.push_back(t.detach().clone().set_requires_grad(true));
  const OutList r = dispatch(op("cudnn_lstm"), in, LstmAttrs{Activation::Tanh, Activation::Sigmoid});
  sum(r[0]).backward();
  Outputs grads;
  for (const Tensor& t : in) grads.push_back(t.grad());
  return grads;
}

const std::vector<ExampleInput> kLstmInputs = {{{2, 5, 3}}, {{2, 4}}, {{2, 4}}, {{3, 16}}, {{4, 16}}, {{16}}};

// cudnn_lstm(x, h0, c0, W, R, b) -> (y (B, T, U), hT, cT, reserve)
OpDef& cudnn_lstm_op = define_op({
    .name = "cudnn_lstm",
    .min_inputs = 6,
    .max_inputs = 6,
    .save = Save::Inputs | Save::Outputs,
    .contiguous_inputs = true,
    .cuda_only = true,
    .attrs = &attrs_of<LstmAttrs>,
    .infer = infer_cudnn_lstm,
    .backward = bw_cudnn_lstm,
    .example = {.inputs = kLstmInputs, .call = lstm_example},
});
// cudnn_lstm_backward(x, h0, c0, W, R, b, y, reserve, gy, ghT, gcT) -> (gx, gh0, gc0, gW, gR, gb).
// cudnnRNNBackwardData_v8 writes into the reserve space (an input/output argument).
OpDef& cudnn_lstm_backward_op = define_op({
    .name = "cudnn_lstm_backward",
    .min_inputs = 11,
    .max_inputs = 11,
    .mutates = 1u << 7,
    .contiguous_inputs = true,
    .cuda_only = true,
    .attrs = &attrs_of<LstmAttrs>,
    .infer = infer_cudnn_lstm_backward,
    .example = {.inputs = kLstmInputs, .call = lstm_backward_example},
});

const bool kRegistered = register_cuda_kernels({
    {"cudnn_lstm", forward_kernel, prepare<false>},
    {"cudnn_lstm_backward", backward_kernel, prepare<true>},
});

}  // namespace

}  // namespace encore::cuda
