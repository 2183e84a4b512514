// The cuDNN RNN fast path: cudnn_lstm and cudnn_gru run a whole unidirectional LSTM or GRU
// sequence in one op, cudnn_lstm_backward and cudnn_gru_backward their gradients. These ops
// exist only in CUDA builds, so this file defines their OpDefs completely (shape inference,
// backward, kernels).
//
// Semantics are Keras' and those of the fused cells (ops/lstm_math.h, ops/gru_math.h), with
// activation tanh and recurrent activation sigmoid (cuDNN's only ones):
//  - LSTM: gates (i, f, c, o), z_t = x_t W + h_{t-1} R + b. cuDNN's linLayerID 0..3 are the
//    input matrices of gates i, f, c ("new memory") and o, 4..7 the recurrent ones: Keras'
//    order. Keras has one bias: it goes into the input biases (linLayerID 0..3); the recurrent
//    biases stay zero.
//  - GRU: Keras' reset_after=True form, which is cuDNN's GRU:
//      r = sig(W_r x + b_Wr + R_r h + b_Rr), i = sig(W_i x + b_Wi + R_i h + b_Ri),
//      h' = tanh(W_h x + b_Wh + r * (R_h h + b_Rh)), h = (1 - i) * h' + i * h_prev,
//    so cuDNN's update gate i is Keras' z. cuDNN's linLayerID 0, 1, 2 are the input matrices
//    of r, i (= z) and h, 3, 4, 5 the recurrent ones: Keras' gates 1, 0, 2. Keras' bias (2, 3U)
//    holds the input biases in row 0 and the recurrent ones in row 1: both kinds are used.
// Each matrix is reported as a {1, rows = hidden, cols = input} tensor: row u holds the weights
// producing gate unit u, so element (u, ch) of input matrix g is our W[ch, kg * U + u] (kg: the
// Keras gate; a transposed block), and likewise R[j, kg * U + u] for recurrent ones. The layout
// is read back from the returned descriptors (dims and strides), and a different one is an
// error rather than a silent mismatch (CUDNN_RNN_DOUBLE_BIAS: separate input and recurrent
// biases).
// The weights are copied into the weight space by one small kernel on every call, and the
// gradients unpacked the same way, so W, R and b stay ordinary parameters.
#include "ops/cuda/cudnn_rnn.h"

#include <climits>
#include <memory>
#include <vector>

#include "core/modes.h"
#include "ops/cuda/cudnn_descriptors.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.h"
#include "ops/dispatch.h"
#include "ops/nn.h"
#include "ops/ops.h"
#include "ops/prepared.h"

namespace encore::cuda {
namespace {

enum class Cell : uint8_t { Lstm, Gru };

// Where each cell's tensors sit among the ops' inputs and outputs.
struct CellInfo {
  const char* op;
  const char* backward_op;
  int gates;
  bool has_c;  // an LSTM's cell state: inputs (x, h0, c0, W, R, b), outputs (y, hT, cT, reserve)
  int w() const { return has_c ? 3 : 2; }        // the kernel's input index; R, b follow
  int num_inputs() const { return w() + 3; }     // of the forward op
  int reserve() const { return has_c ? 3 : 2; }  // the reserve's output index
  // Keras' gate of cuDNN's gate g: the GRU's r and z change places.
  int keras_gate(int g) const { return has_c || g == 2 ? g : 1 - g; }
};
constexpr CellInfo kLstm{"cudnn_lstm", "cudnn_lstm_backward", 4, true};
constexpr CellInfo kGru{"cudnn_gru", "cudnn_gru_backward", 3, false};
constexpr const CellInfo& info(Cell c) { return c == Cell::Lstm ? kLstm : kGru; }

struct RnnKey {
  int device;
  Cell cell;
  int64_t batch, steps, input, units;
  bool tf32;
  bool operator==(const RnnKey&) const = default;
};

// Where one matrix or bias lives in the weight space.
struct WeightSlot {
  int64_t offset, rows, cols, row_stride, col_stride;
};

// Descriptors, sizes and the weight-space layout of one problem. Immutable once built.
struct RnnSetup {
  RnnKey key;
  DropoutDescriptor dropout;
  DeviceBuffer dropout_states;
  RnnDescriptor rnn;
  RnnDataDescriptor x, y;
  TensorDescriptor h;  // also describes an LSTM's c: (layers = 1, batch, units)
  size_t weight_bytes = 0, work_bytes = 0, reserve_bytes = 0;
  // By cuDNN's linLayerID: the input gates' matrices, then the recurrent ones; biases likewise
  // (an LSTM uses only its input biases).
  WeightSlot matrices[8], biases[8];
  DeviceBuffer seq_lengths;  // batch x int32, all `steps`
};

int as_int(int64_t v) {
  ENCORE_CHECK(v >= 1 && v <= INT_MAX, UnsupportedError, "[cudnn_rnn] size ", v,
               " is outside cuDNN's range");
  return static_cast<int>(v);
}

WeightSlot read_slot(cudnnTensorDescriptor_t desc, const void* base, const void* addr, int64_t rows,
                     int64_t cols, const char* what, int id) {
  cudnnDataType_t type;
  int nb = 0, dims[3] = {}, strides[3] = {};
  ENCORE_CUDA_CHECK("cudnn_rnn", cudnnGetTensorNdDescriptor(desc, 3, &type, &nb, dims, strides));
  const ptrdiff_t bytes = static_cast<const char*>(addr) - static_cast<const char*>(base);
  ENCORE_CHECK(type == CUDNN_DATA_FLOAT && nb == 3 && dims[0] == 1 && dims[1] == rows &&
                   dims[2] == cols && bytes >= 0 && bytes % sizeof(float) == 0,
               BackendError, "[cudnn_rnn] cuDNN reports ", what, " ", id, " as (", dims[0], ", ",
               dims[1], ", ", dims[2], ") at byte ", bytes, "; expected (1, ", rows, ", ", cols,
               ")");
  return {static_cast<int64_t>(bytes / sizeof(float)), rows, cols, strides[1], strides[2]};
}

std::shared_ptr<RnnSetup> make_setup(const RnnKey& k) {
  const CellInfo& cell = info(k.cell);
  auto s = std::make_shared<RnnSetup>();
  s->key = k;
  const OnDevice dev(k.device);
  const cudnnHandle_t h = cudnn(k.device);
  // No dropout inside a single layer; cuDNN still wants a descriptor. With rate 0 it needs no
  // random states; should this cuDNN insist, give it some.
  if (cudnnSetDropoutDescriptor(s->dropout.get(), h, 0.0f, nullptr, 0, 0) != CUDNN_STATUS_SUCCESS) {
    size_t state_bytes = 0;
    ENCORE_CUDA_CHECK(cell.op, cudnnDropoutGetStatesSize(h, &state_bytes));
    s->dropout_states = DeviceBuffer(state_bytes, k.device);
    ENCORE_CUDA_CHECK(cell.op, cudnnSetDropoutDescriptor(s->dropout.get(), h, 0.0f,
                                                         s->dropout_states.data(), state_bytes, 0));
  }
  const int batch = as_int(k.batch), steps = as_int(k.steps), input = as_int(k.input),
            units = as_int(k.units);
  as_int(k.batch * k.steps * std::max(k.input, k.units));
  auto describe_rnn = [&](cudnnMathType_t math) {
    return cudnnSetRNNDescriptor_v8(s->rnn.get(), CUDNN_RNN_ALGO_STANDARD,
                                    k.cell == Cell::Lstm ? CUDNN_LSTM : CUDNN_GRU,
                                    CUDNN_RNN_DOUBLE_BIAS, CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT,
                                    CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, math, input, units, units,
                                    1, s->dropout.get(), CUDNN_RNN_PADDED_IO_ENABLED);
  };
  // Without TF32, FMA math keeps float32 exact; should this cuDNN refuse FMA for RNNs, its
  // default math is the fallback.
  if (k.tf32 || describe_rnn(CUDNN_FMA_MATH) != CUDNN_STATUS_SUCCESS)
    ENCORE_CUDA_CHECK(cell.op, describe_rnn(CUDNN_DEFAULT_MATH));
  // Batch-major (B, T, features) is our layout; unpacked layouts need padded I/O enabled above
  // (every sequence here has the full length, so nothing is actually padded).
  const std::vector<int> lengths(batch, steps);
  ENCORE_CUDA_CHECK(
      cell.op, cudnnSetRNNDataDescriptor(s->x.get(), CUDNN_DATA_FLOAT,
                                         CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED, steps, batch,
                                         input, lengths.data(), nullptr));
  ENCORE_CUDA_CHECK(
      cell.op, cudnnSetRNNDataDescriptor(s->y.get(), CUDNN_DATA_FLOAT,
                                         CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED, steps, batch,
                                         units, lengths.data(), nullptr));
  const int dims[3] = {1, batch, units}, strides[3] = {batch * units, units, 1};
  ENCORE_CUDA_CHECK(cell.op,
                    cudnnSetTensorNdDescriptor(s->h.get(), CUDNN_DATA_FLOAT, 3, dims, strides));
  ENCORE_CUDA_CHECK(cell.op, cudnnGetRNNWeightSpaceSize(h, s->rnn.get(), &s->weight_bytes));
  ENCORE_CUDA_CHECK(cell.op,
                    cudnnGetRNNTempSpaceSizes(h, s->rnn.get(), CUDNN_FWD_MODE_TRAINING, s->x.get(),
                                              &s->work_bytes, &s->reserve_bytes));
  // The layout needs a real weight-space address to report offsets against.
  const DeviceBuffer probe(s->weight_bytes, k.device);
  TensorDescriptor m, b;
  for (int id = 0; id < 2 * cell.gates; ++id) {
    void* maddr = nullptr;
    void* baddr = nullptr;
    ENCORE_CUDA_CHECK(cell.op,
                      cudnnGetRNNWeightParams(h, s->rnn.get(), 0, s->weight_bytes, probe.data(), id,
                                              m.get(), &maddr, b.get(), &baddr));
    const bool input_gate = id < cell.gates;
    s->matrices[id] = read_slot(m.get(), probe.data(), maddr, k.units,
                                input_gate ? k.input : k.units, "matrix", id);
    if (input_gate || !cell.has_c)
      s->biases[id] = read_slot(b.get(), probe.data(), baddr, k.units, 1, "bias", id);
  }
  s->seq_lengths = DeviceBuffer(static_cast<size_t>(batch) * sizeof(int32_t), k.device);
  fill_int32(s->seq_lengths.as<int32_t>(), batch, steps, dev.stream());
  return s;
}

// Our tensors' place in the weight space (see the file comment for the mapping).
RnnSlots slots_for(const RnnSetup& s, float* W, float* R, float* b) {
  const CellInfo& cell = info(s.key.cell);
  const int64_t units = s.key.units, row = cell.gates * units;
  RnnSlots t;
  auto add = [&](const WeightSlot& w, float* tensor, int64_t t_col) {
    t.slot[t.count++] = {w.offset, w.rows, w.cols, w.row_stride, w.col_stride, tensor, 1, t_col};
  };
  for (int g = 0; g < cell.gates; ++g) {
    const int64_t at = cell.keras_gate(g) * units;
    add(s.matrices[g], W + at, row);
    add(s.matrices[cell.gates + g], R + at, row);
    add(s.biases[g], b + at, 0);
    if (!cell.has_c) add(s.biases[cell.gates + g], b + row + at, 0);  // the GRU's bias row 1
  }
  return t;
}

RnnKey key_of(Cell cell, const TensorRef& x, const TensorRef& h0) {
  return {x.device.index, cell, x.shape[0], x.shape[1], x.shape[2], h0.shape[1], allow_tf32()};
}

template <Cell C> std::shared_ptr<void> make_setup_of(const KernelCtx& c) {
  return make_setup(key_of(C, c.in[0], c.in[1]));
}

// Shape inference already needs cuDNN's reserve size (an output), before any kernel state
// exists: the setup of (x, h0) is kept in the dispatcher's cache as a setup of its own
// (ops/prepared.h), which the kernels' states share.
template <Cell C>
std::shared_ptr<const RnnSetup> setup_for(const TensorRef& x, const TensorRef& h0,
                                          const Attrs& attrs) {
  const TensorRef tensors[] = {x, h0};
  return std::static_pointer_cast<const RnnSetup>(
      prepared_setup(op(info(C).op), x.device, tensors, attrs, make_setup_of<C>));
}

// ---- definitions -------------------------------------------------------------------------

// `in`: the forward op's inputs.
void check_rnn_inputs(Cell c, const char* op, std::span<const Tensor> in, const Attrs& attrs) {
  const CellInfo& cell = info(c);
  const auto& a = attrs.as<LstmAttrs>();
  ENCORE_CHECK(a.activation == Activation::Tanh && a.recurrent_activation == Activation::Sigmoid,
               UnsupportedError, "[", op, "] cuDNN's ", cell.has_c ? "LSTM" : "GRU",
               " computes activation=tanh, recurrent_activation=sigmoid; got ", a.str(),
               cell.has_c ? " (use the composed LSTM)" : " (use the composed GRU)");
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
  const int64_t batch = x.shape()[0], input = x.shape()[2], g = cell.gates;
  const int64_t units = in[1].dim() == 2 ? in[1].shape()[1] : 0;
  const Shape state{batch, units}, w{input, g * units}, r{units, g * units};
  const Shape bias = cell.has_c ? Shape{g * units} : Shape{2, g * units};
  const int wi = cell.w();
  ENCORE_CHECK(units >= 1 && in[1].shape() == state && (!cell.has_c || in[2].shape() == state) &&
                   in[wi].shape() == w && in[wi + 1].shape() == r && in[wi + 2].shape() == bias,
               ShapeError, "[", op, "] for input ", x.shape().str(), " expects h0",
               cell.has_c ? " and c0" : "", " (batch, units), kernel (", input, ", ", g,
               " * units), recurrent kernel (units, ", g, " * units) and bias ",
               cell.has_c ? "(4 * units)" : "(2, 3 * units)", "; got ", in[1].shape().str(), ", ",
               in[wi].shape().str(), ", ", in[wi + 1].shape().str(), ", ",
               in[wi + 2].shape().str());
}

// cudnn_lstm(x, h0, c0, W, R, b) -> (y (B, T, U), hT, cT, reserve)
// cudnn_gru(x, h0, W, R, b) -> (y (B, T, U), hT, reserve)
template <Cell C>
int infer_forward(const OpDef&, std::span<const Tensor> in, const Attrs& attrs, TensorMeta* out) {
  const CellInfo& cell = info(C);
  check_rnn_inputs(C, cell.op, in, attrs);
  const Tensor& x = in[0];
  const Device dev = x.device();
  const int64_t units = in[1].shape()[1];
  const auto ref = [](const Tensor& t) {
    return TensorRef{nullptr, t.shape(), contiguous_strides(t.shape()), t.dtype(), t.device()};
  };
  const auto setup = setup_for<C>(ref(x), ref(in[1]), attrs);
  out[0] = {Shape{x.shape()[0], x.shape()[1], units}, {}, 0, DType::Float32, dev};
  for (int i = 1; i < cell.reserve(); ++i) out[i] = {in[1].shape(), {}, 0, DType::Float32, dev};
  out[cell.reserve()] = {
      Shape{static_cast<int64_t>((setup->reserve_bytes + 3) / 4)}, {}, 0, DType::Float32, dev};
  return cell.reserve() + 1;
}

// The backward op's inputs: the forward's, then y, reserve, gy, ghT (and an LSTM's gcT).
template <Cell C> void bw_forward(const BackwardCtx& c, Tensor* g) {
  const CellInfo& cell = info(C);
  auto grad = [&](int i) { return c.grads[i].defined() ? c.grads[i] : zeros_like(c.outputs[i]); };
  std::vector<Tensor> in(c.inputs.begin(), c.inputs.end());
  in.push_back(c.outputs[0]);
  in.push_back(c.outputs[cell.reserve()]);
  for (int i = 0; i < cell.reserve(); ++i) in.push_back(grad(i));
  const OutList r = dispatch(op(cell.backward_op), in, c.attrs);
  for (int i = 0; i < cell.num_inputs(); ++i)
    if (c.need(i)) g[i] = r[i];
}

// cudnn_lstm_backward(x, h0, c0, W, R, b, y, reserve, gy, ghT, gcT) -> (gx, gh0, gc0, gW, gR, gb)
// cudnn_gru_backward(x, h0, W, R, b, y, reserve, gy, ghT) -> (gx, gh0, gW, gR, gb)
template <Cell C>
int infer_backward(const OpDef&, std::span<const Tensor> in, const Attrs& attrs, TensorMeta* out) {
  const CellInfo& cell = info(C);
  const int n = cell.num_inputs();
  check_rnn_inputs(C, cell.backward_op, in.subspan(0, n), attrs);
  const Tensor& x = in[0];
  const Shape y{x.shape()[0], x.shape()[1], in[1].shape()[1]};
  bool ok = in[n].shape() == y && in[n + 1].dim() == 1 && in[n + 2].shape() == y;
  for (int i = n + 3; i < static_cast<int>(in.size()); ++i)
    ok = ok && in[i].shape() == in[1].shape();
  ENCORE_CHECK(ok, ShapeError, "[", cell.backward_op,
               "] outputs and gradients do not match the input ", x.shape().str());
  for (int i = n; i < static_cast<int>(in.size()); ++i)
    ENCORE_CHECK(in[i].dtype() == DType::Float32 && in[i].device() == x.device(), DTypeError, "[",
                 cell.backward_op, "] input ", i, " ", describe(in[i]), " must be float32 on ",
                 x.device().str());
  for (int i = 0; i < n; ++i) out[i] = {in[i].shape(), {}, 0, DType::Float32, x.device()};
  return n;
}

// ---- kernels -----------------------------------------------------------------------------

struct RnnState {
  std::shared_ptr<const RnnSetup> setup;
  DeviceBuffer weights, dweights, work;
};

template <Cell C> RnnState make_state(const KernelCtx& c, bool backward) {
  const RnnKey k = key_of(C, c.in[0], c.in[1]);
  RnnState s;
  s.setup = setup_for<C>(c.in[0], c.in[1], c.attrs);
  s.weights = DeviceBuffer(s.setup->weight_bytes, k.device);
  if (backward) s.dweights = DeviceBuffer(s.setup->weight_bytes, k.device);
  s.work = DeviceBuffer(s.setup->work_bytes, k.device);
  return s;
}

// The prepared state: the dispatcher's cache hands every call one made for its shape.
template <Cell C> const RnnState& state_for(const KernelCtx& c) {
  const RnnKey k = key_of(C, c.in[0], c.in[1]);
  const auto* prepared = static_cast<const RnnState*>(c.state);
  RnnKey same = k;
  same.tf32 = prepared->setup->key.tf32;  // a prepared state keeps the math mode it was built with
  ENCORE_CHECK(prepared->setup->key == same, BackendError, "[", c.op,
               "] called with a prepared state made for another shape");
  return *prepared;
}

void check_reserve(const RnnSetup& s, const TensorRef& reserve, const char* op) {
  ENCORE_CHECK(static_cast<size_t>(reserve.numel()) * sizeof(float) >= s.reserve_bytes, ValueError,
               "[", op, "] reserve of ", reserve.numel(), " floats is smaller than the ",
               s.reserve_bytes, " bytes cuDNN needs for this shape");
}

void pack_weights(const RnnState& st, const KernelCtx& c, cudaStream_t stream) {
  const RnnSetup& s = *st.setup;
  const int w = info(s.key.cell).w();
  // Zero first: padding inside the weight space and an LSTM's recurrent biases stay 0.
  ENCORE_CUDA_CHECK(c.op, cudaMemsetAsync(st.weights.data(), 0, s.weight_bytes, stream));
  move_rnn_weights(
      slots_for(s, c.in[w].ptr<float>(), c.in[w + 1].ptr<float>(), c.in[w + 2].ptr<float>()),
      st.weights.as<float>(), true, stream);
}

template <Cell C> void forward_kernel(const KernelCtx& c);
template <Cell C> void backward_kernel(const KernelCtx& c);

// Runs the op once (and its backward, for a state made for it), with the prepared state, on
// zeroed scratch tensors, on the capture stream through the capture's cuDNN handle (a
// CaptureScope warm-up, joined to the compute stream): whatever cuDNN sets up lazily on a
// handle's first execution then happens while the Plan is built, on the handle its capture
// uses, and not inside the capture. Every scratch tensor is allocated before the warm-up.
template <Cell C> void warm_up(const RnnState& st, const KernelCtx& c, bool backward) {
  const CellInfo& cell = info(C);
  const RnnKey& k = st.setup->key;
  const Device dev = Device::cuda(k.device);
  std::vector<DeviceBuffer> buffers;
  buffers.reserve(32);
  auto scratch = [&](const Shape& shape) {
    buffers.emplace_back(shape.numel() * sizeof(float), k.device);
    if (buffers.back().size() > 0)
      ENCORE_CUDA_CHECK(
          c.op, cudaMemsetAsync(buffers.back().data(), 0, buffers.back().size(), stream(k.device)));
    return TensorRef{buffers.back().data(), shape, contiguous_strides(shape), DType::Float32, dev};
  };
  const int64_t g = cell.gates;
  const Shape seq_in{k.batch, k.steps, k.input}, seq_out{k.batch, k.steps, k.units},
      state{k.batch, k.units}, w{k.input, g * k.units}, r{k.units, g * k.units},
      b = cell.has_c ? Shape{g * k.units} : Shape{2, g * k.units},
      reserve{static_cast<int64_t>((st.setup->reserve_bytes + 3) / 4)};
  std::vector<TensorRef> in{scratch(seq_in), scratch(state)};
  if (cell.has_c) in.push_back(scratch(state));
  for (const Shape& s : {w, r, b}) in.push_back(scratch(s));
  std::vector<TensorRef> out{scratch(seq_out), scratch(state)};
  if (cell.has_c) out.push_back(scratch(state));
  out.push_back(scratch(reserve));
  std::vector<TensorRef> grad_in, grad_out;
  if (backward) {
    grad_in = in;
    grad_in.push_back(out[0]);
    grad_in.push_back(out.back());
    grad_in.push_back(scratch(seq_out));
    for (int i = 1; i < cell.reserve(); ++i) grad_in.push_back(scratch(state));
    for (const TensorRef& t : in) grad_out.push_back(scratch(t.shape));
  }
  // Declared after the buffers: it ends (the compute stream waits for the warm-up) before they
  // are freed on the compute stream.
  CaptureScope scope(k.device, CaptureScope::Mode::WarmUp);
  scope.set_op(cell.op);
  forward_kernel<C>(KernelCtx{in, out, c.attrs, const_cast<RnnState*>(&st), cell.op});
  if (!backward) return;
  scope.set_op(cell.backward_op);
  backward_kernel<C>(
      KernelCtx{grad_in, grad_out, c.attrs, const_cast<RnnState*>(&st), cell.backward_op});
}

template <Cell C, bool Backward> std::shared_ptr<void> prepare(const KernelCtx& c) {
  const OnDevice dev(c);
  auto state = std::make_shared<RnnState>(make_state<C>(c, Backward));
  warm_up<C>(*state, c, Backward);
  return state;
}

template <Cell C> void forward_kernel(const KernelCtx& c) {
  const CellInfo& cell = info(C);
  const OnDevice dev(c);
  const RnnState& st = state_for<C>(c);
  const RnnSetup& s = *st.setup;
  check_reserve(s, c.out[cell.reserve()], cell.op);
  pack_weights(st, c, dev.stream());
  // A GRU has no cell state: cuDNN takes null c pointers.
  const void* cx = cell.has_c ? c.in[2].data : nullptr;
  void* cy = cell.has_c ? c.out[2].data : nullptr;
  ENCORE_CUDA_CHECK(
      cell.op, cudnnRNNForward(cudnn(dev.device()), s.rnn.get(), CUDNN_FWD_MODE_TRAINING,
                               s.seq_lengths.as<const int32_t>(), s.x.get(), c.in[0].data,
                               s.y.get(), c.out[0].data, s.h.get(), c.in[1].data, c.out[1].data,
                               s.h.get(), cx, cy, s.weight_bytes, st.weights.data(), s.work_bytes,
                               st.work.data(), s.reserve_bytes, c.out[cell.reserve()].data));
}

template <Cell C> void backward_kernel(const KernelCtx& c) {
  const CellInfo& cell = info(C);
  const OnDevice dev(c);
  const RnnState& st = state_for<C>(c);
  const RnnSetup& s = *st.setup;
  const cudnnHandle_t h = cudnn(dev.device());
  const int n = cell.num_inputs();
  const TensorRef &x = c.in[0], &h0 = c.in[1], &y = c.in[n], &reserve = c.in[n + 1];
  const void* c0 = cell.has_c ? c.in[2].data : nullptr;
  const void* gcT = cell.has_c ? c.in[n + 4].data : nullptr;
  void* gc0 = cell.has_c ? c.out[2].data : nullptr;
  check_reserve(s, reserve, cell.backward_op);
  pack_weights(st, c, dev.stream());
  // Backward data first: it leaves in the reserve space what backward weights reads.
  ENCORE_CUDA_CHECK(
      cell.backward_op,
      cudnnRNNBackwardData_v8(h, s.rnn.get(), s.seq_lengths.as<const int32_t>(), s.y.get(), y.data,
                              c.in[n + 2].data, s.x.get(), c.out[0].data, s.h.get(), h0.data,
                              c.in[n + 3].data, c.out[1].data, s.h.get(), c0, gcT, gc0,
                              s.weight_bytes, st.weights.data(), s.work_bytes, st.work.data(),
                              s.reserve_bytes, reserve.data));
  // Weight gradients are added into the buffer: start from zero.
  ENCORE_CUDA_CHECK(cell.backward_op,
                    cudaMemsetAsync(st.dweights.data(), 0, s.weight_bytes, dev.stream()));
  ENCORE_CUDA_CHECK(
      cell.backward_op,
      cudnnRNNBackwardWeights_v8(h, s.rnn.get(), CUDNN_WGRAD_MODE_ADD,
                                 s.seq_lengths.as<const int32_t>(), s.x.get(), x.data, s.h.get(),
                                 h0.data, s.y.get(), y.data, s.weight_bytes, st.dweights.data(),
                                 s.work_bytes, st.work.data(), s.reserve_bytes, reserve.data));
  // The biases' gradients are b's (an LSTM's b feeds only the input biases; its recurrent
  // biases are constant 0).
  const int w = cell.w();
  move_rnn_weights(
      slots_for(s, c.out[w].ptr<float>(), c.out[w + 1].ptr<float>(), c.out[w + 2].ptr<float>()),
      st.dweights.as<float>(), false, dev.stream());
}

// The examples run the ops on random inputs (the table runs them on a GPU only); the backward
// ops' run through autograd.
template <Cell C> Outputs forward_example(std::span<const Tensor> x) {
  const OutList r = dispatch(op(info(C).op), x, LstmAttrs{Activation::Tanh, Activation::Sigmoid});
  return Outputs(r.t.begin(), r.t.begin() + info(C).reserve());
}
template <Cell C> Outputs backward_example(std::span<const Tensor> x) {
  std::vector<Tensor> in;
  for (const Tensor& t : x) in.push_back(t.detach().clone().set_requires_grad(true));
  const OutList r = dispatch(op(info(C).op), in, LstmAttrs{Activation::Tanh, Activation::Sigmoid});
  sum(r[0]).backward();
  Outputs grads;
  for (const Tensor& t : in) grads.push_back(t.grad());
  return grads;
}

constexpr uint8_t kCudaOnly = 1u << static_cast<int>(DeviceType::CUDA);
const std::vector<ExampleInput> kLstmInputs = {{{2, 5, 3}}, {{2, 4}},  {{2, 4}},
                                               {{3, 16}},   {{4, 16}}, {{16}}};
const std::vector<ExampleInput> kGruInputs = {
    {{2, 5, 3}}, {{2, 4}}, {{3, 12}}, {{4, 12}}, {{2, 12}}};

OpDef& cudnn_lstm_op = define_op({
    .name = "cudnn_lstm",
    .min_inputs = 6,
    .max_inputs = 6,
    .save = Save::Inputs | Save::Outputs,
    .contiguous_inputs = true,
    .backends = kCudaOnly,
    .fused_cell = RecurrentCell::Lstm,
    .attrs = &attrs_of<LstmAttrs>,
    .infer = infer_forward<Cell::Lstm>,
    .backward = bw_forward<Cell::Lstm>,
    .examples = {{.inputs = kLstmInputs, .call = forward_example<Cell::Lstm>}},
});
// cudnnRNNBackwardData_v8 writes into the reserve space (an input/output argument).
OpDef& cudnn_lstm_backward_op = define_op({
    .name = "cudnn_lstm_backward",
    .min_inputs = 11,
    .max_inputs = 11,
    .mutates = 1u << 7,
    .contiguous_inputs = true,
    .backends = kCudaOnly,
    .attrs = &attrs_of<LstmAttrs>,
    .infer = infer_backward<Cell::Lstm>,
    .examples = {{.inputs = kLstmInputs, .call = backward_example<Cell::Lstm>}},
});
OpDef& cudnn_gru_op = define_op({
    .name = "cudnn_gru",
    .min_inputs = 5,
    .max_inputs = 5,
    .save = Save::Inputs | Save::Outputs,
    .contiguous_inputs = true,
    .backends = kCudaOnly,
    .fused_cell = RecurrentCell::Gru,
    .attrs = &attrs_of<LstmAttrs>,
    .infer = infer_forward<Cell::Gru>,
    .backward = bw_forward<Cell::Gru>,
    .examples = {{.inputs = kGruInputs, .call = forward_example<Cell::Gru>}},
});
OpDef& cudnn_gru_backward_op = define_op({
    .name = "cudnn_gru_backward",
    .min_inputs = 9,
    .max_inputs = 9,
    .mutates = 1u << 6,
    .contiguous_inputs = true,
    .backends = kCudaOnly,
    .attrs = &attrs_of<LstmAttrs>,
    .infer = infer_backward<Cell::Gru>,
    .examples = {{.inputs = kGruInputs, .call = backward_example<Cell::Gru>}},
});

const bool kRegistered = register_cuda_kernels({
    {"cudnn_lstm", forward_kernel<Cell::Lstm>, prepare<Cell::Lstm, false>},
    {"cudnn_lstm_backward", backward_kernel<Cell::Lstm>, prepare<Cell::Lstm, true>},
    {"cudnn_gru", forward_kernel<Cell::Gru>, prepare<Cell::Gru, false>},
    {"cudnn_gru_backward", backward_kernel<Cell::Gru>, prepare<Cell::Gru, true>},
});

}  // namespace

}  // namespace encore::cuda
