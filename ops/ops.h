// The public op API: free functions that build tensors. Each goes through the dispatcher, so
// it runs eagerly, or is recorded when called inside a traced function, and is differentiable
// where the math allows. Errors name the op and the shapes.
#pragma once

#include <optional>
#include <vector>

#include "core/scalar.h"
#include "ops/activation.h"
#include "ops/tensor.h"
#include "ops/window.h"

namespace encore {

class Generator;
struct OpDef;

// Scalars (fill values, scalar operands, bounds) are exact int64s or doubles (core/scalar.h).
// On an integer tensor a scalar must be finite and within the dtype's range; a fractional
// value is truncated toward zero (a ValueError otherwise).

// ---- creation --------------------------------------------------------------------------
// A dtype of nullopt is float32 (for *_like: t's dtype), a device of nullopt the CPU (for
// *_like: t's device); `requires_grad` makes the result a leaf that requires grad.
Tensor zeros(const Shape& shape, std::optional<DType> dtype = std::nullopt,
             std::optional<Device> device = std::nullopt, bool requires_grad = false);
Tensor ones(const Shape& shape, std::optional<DType> dtype = std::nullopt,
            std::optional<Device> device = std::nullopt, bool requires_grad = false);
/// Uninitialized (Tensor::empty with the defaults above).
Tensor empty(const Shape& shape, std::optional<DType> dtype = std::nullopt,
             std::optional<Device> device = std::nullopt);
Tensor full(const Shape& shape, Scalar fill_value, std::optional<DType> dtype = std::nullopt,
            std::optional<Device> device = std::nullopt, bool requires_grad = false);
Tensor zeros_like(const Tensor& t, std::optional<DType> dtype = std::nullopt,
                  std::optional<Device> device = std::nullopt);
Tensor ones_like(const Tensor& t, std::optional<DType> dtype = std::nullopt,
                 std::optional<Device> device = std::nullopt);
Tensor full_like(const Tensor& t, Scalar fill_value, std::optional<DType> dtype = std::nullopt,
                 std::optional<Device> device = std::nullopt);
/// start, start + step, ... up to (not including) stop; exact for integer bounds and step.
/// Without `stop`, 0 up to `start` (arange(5)). The dtype defaults to int64 when the bounds
/// and step are integers, else float32 (as NumPy).
Tensor arange(Scalar start, std::optional<Scalar> stop = std::nullopt, Scalar step = 1,
              std::optional<DType> dtype = std::nullopt,
              std::optional<Device> device = std::nullopt, bool requires_grad = false);
/// A tensor holding a copy of `data` (row-major) with the given shape.
template <class T>
Tensor from_vector(const std::vector<T>& data, const Shape& shape, Device device = Device::cpu());
/// A float32 tensor from literal values: tensor({1, 2, 3, 4}, {2, 2}).
Tensor tensor(std::initializer_list<double> values, const Shape& shape,
              DType dtype = DType::Float32, Device device = Device::cpu());
/// Uniform on [low, high) / normal, from `generator` (default: the device's default generator).
Tensor uniform(const Shape& shape, double low = 0.0, double high = 1.0,
               std::optional<DType> dtype = std::nullopt,
               std::optional<Device> device = std::nullopt, Generator* generator = nullptr,
               bool requires_grad = false);
Tensor normal(const Shape& shape, double mean = 0.0, double std = 1.0,
              std::optional<DType> dtype = std::nullopt,
              std::optional<Device> device = std::nullopt, Generator* generator = nullptr,
              bool requires_grad = false);
/// uniform(shape) and normal(shape): on [0, 1) and standard normal.
Tensor rand(const Shape& shape, std::optional<DType> dtype = std::nullopt,
            std::optional<Device> device = std::nullopt, Generator* generator = nullptr,
            bool requires_grad = false);
Tensor randn(const Shape& shape, std::optional<DType> dtype = std::nullopt,
             std::optional<Device> device = std::nullopt, Generator* generator = nullptr,
             bool requires_grad = false);

// ---- elementwise (NumPy broadcasting; both inputs must have the same dtype) -------------
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor tanh(const Tensor& x);
/// The error function (a primitive: gelu is composed from it).
Tensor erf(const Tensor& x);
/// Keras gelu: x * Phi(x), Phi the standard normal CDF (exact, through erf), or with
/// `approximate` its tanh form 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
Tensor gelu(const Tensor& x, bool approximate = false);
/// The result remembers `x` (ops/sigmoid_origin.h): binary_crossentropy then computes
/// from the logits.
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor softplus(const Tensor& x);
/// Binary cross-entropy of logits `z` against targets `y`, elementwise (broadcasting):
/// softplus(z) - z * y, in one kernel, as is its gradient in z, sigmoid(z) - y.
Tensor binary_crossentropy_logits(const Tensor& z, const Tensor& y);
Tensor leaky_relu(const Tensor& x, double alpha = 0.3);
Tensor pow(const Tensor& x, double p);
Tensor clip(const Tensor& x, Scalar min, Scalar max);
/// Applies a Keras activation by name or enum ("linear" returns x, "softmax" normalizes the
/// last axis).
Tensor activation(const Tensor& x, Activation name);

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, Scalar b);
Tensor sub(const Tensor& a, Scalar b);
Tensor mul(const Tensor& a, Scalar b);
Tensor div(const Tensor& a, Scalar b);
Tensor maximum(const Tensor& a, Scalar b);
Tensor minimum(const Tensor& a, Scalar b);

// Comparisons return 1/0 masks in the inputs' dtype (so `x * (x > 0)` needs no cast).
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, Scalar b);
Tensor ne(const Tensor& a, Scalar b);
Tensor gt(const Tensor& a, Scalar b);
Tensor ge(const Tensor& a, Scalar b);
Tensor lt(const Tensor& a, Scalar b);
Tensor le(const Tensor& a, Scalar b);

Tensor operator-(const Tensor& x);
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, Scalar b);
Tensor operator-(const Tensor& a, Scalar b);
Tensor operator*(const Tensor& a, Scalar b);
Tensor operator/(const Tensor& a, Scalar b);
Tensor operator+(Scalar a, const Tensor& b);
Tensor operator-(Scalar a, const Tensor& b);
Tensor operator*(Scalar a, const Tensor& b);
Tensor operator/(Scalar a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);

// ---- reductions (empty `axis`: all axes) ---------------------------------------------
Tensor sum(const Tensor& x, const std::vector<int64_t>& axis = {}, bool keepdims = false);
Tensor mean(const Tensor& x, const std::vector<int64_t>& axis = {}, bool keepdims = false);
Tensor max(const Tensor& x, const std::vector<int64_t>& axis = {}, bool keepdims = false);
/// Sums `x` down to `shape` (the inverse of broadcasting `shape` up to x's shape).
Tensor sum_to(const Tensor& x, const Shape& shape);

// ---- data movement ---------------------------------------------------------------------
Tensor concat(const std::vector<Tensor>& tensors, int64_t axis = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t axis = 0);
/// The entries along `axis` as views without that axis (x[..., i, ...] for each i).
std::vector<Tensor> unbind(const Tensor& x, int64_t axis = 0);
/// `sections` equal views along `axis` (a ValueError unless it divides the axis), as numpy.split.
std::vector<Tensor> split(const Tensor& x, int64_t sections, int64_t axis = 0);
/// Reverses the order of entries along `axis` (a copy).
Tensor flip(const Tensor& x, int64_t axis);
/// Per row b, the first lengths[b] entries along `axis` reversed, the rest in place
/// (tf.reverse_sequence); lengths: int32/int64 (1,) (every row) or (rows,) with axis > 0.
Tensor reverse_sequence(const Tensor& x, const Tensor& lengths, int64_t axis = 1);
/// `x` with the entries at or past lengths[b] along `axis` set to `value` (lengths as above).
Tensor mask_sequence(const Tensor& x, const Tensor& lengths, int64_t axis = 1, double value = 0.0);
/// `x` with `before` and `after` entries of `value` added along `axis`.
Tensor pad(const Tensor& x, int64_t axis, int64_t before, int64_t after, Scalar value = 0);
/// The windows of `size` entries, `step` apart, along `axis`, as a view (no copy): `axis`
/// becomes the window index and a new last axis the position in the window. Windows overlap
/// when step < size; the gradient sums over them.
Tensor unfold(const Tensor& x, int64_t axis, int64_t size, int64_t step = 1);
/// Keras MaxPooling1D on x (batch, steps, channels): the max of each window of `pool_size`
/// steps, `strides` apart (default pool_size). Padding is 'valid' or 'same' (padded steps are
/// never the max). Ties in a window share its gradient equally, as in max().
Tensor max_pool1d(const Tensor& x, int64_t pool_size = 2,
                  std::optional<int64_t> strides = std::nullopt,
                  Padding padding = Padding::valid());
/// Keras AveragePooling1D on floating x (batch, steps, channels): the mean of each window, as
/// max_pool1d's windows. With 'same' padding a window divides by the real steps it covers,
/// not by pool_size (the padding is not averaged in), as in Keras.
Tensor avg_pool1d(const Tensor& x, int64_t pool_size = 2,
                  std::optional<int64_t> strides = std::nullopt,
                  Padding padding = Padding::valid());

// ---- linear algebra and convolution --------------------------------------------------
/// (..., M, K) @ (..., K, N) with broadcast batch dims; 1-D operands as in NumPy.
Tensor matmul(const Tensor& a, const Tensor& b);

/// activation(x @ w + b) in one kernel: x (..., features), w (features, units), b (units,); the
/// Dense layer's step. Activations whose gradient is not a function of the output (gelu,
/// softmax) are refused.
Tensor dense(const Tensor& x, const Tensor& w, const Tensor& b,
             Activation activation = Activation::Linear);

/// x: (batch, steps, in_channels), w: (kernel_size, in_channels, filters) — channels-last, as
/// in Keras. Returns (batch, out_steps, filters). Bias is added separately.
Tensor conv1d(const Tensor& x, const Tensor& w, int64_t stride = 1,
              Padding padding = Padding::valid(), int64_t dilation = 1);
/// activation(conv1d(x, w, ...) + b) in one kernel (b: (filters,)): the Conv1D layer's step.
Tensor conv1d_fused(const Tensor& x, const Tensor& w, const Tensor& b, int64_t stride = 1,
                    Padding padding = Padding::valid(), int64_t dilation = 1,
                    Activation activation = Activation::Linear);
/// x (batch, steps, channels) in oneDNN's blocked layout nCw{block}c: (batch, ceil(channels /
/// block), steps, block), the last block's missing channels zero. Its gradient is from_blocked.
Tensor to_blocked(const Tensor& x, int64_t block);
/// The inverse of to_blocked: xb (batch, blocks, steps, block) -> (batch, steps, channels).
Tensor from_blocked(const Tensor& xb, int64_t channels);

// ---- neural-network building blocks --------------------------------------------------
Tensor softmax(const Tensor& x, int64_t axis = -1);
Tensor log_softmax(const Tensor& x, int64_t axis = -1);
/// Inverted dropout: zeroes elements with probability p and scales the rest by 1/(1-p).
/// Identity when p == 0 or not training (nullopt: the global mode, encore::training()). The mask
/// comes from `generator`'s counter-based stream.
Tensor dropout(const Tensor& x, double p, std::optional<bool> training = std::nullopt,
               Generator* generator = nullptr);
/// out[..., 0] = x[..., index[...]]: picks one entry of the last axis per row.
Tensor gather_last(const Tensor& x, const Tensor& index);
/// The adjoint of gather_last: zeros of (..., n) with g scattered at index.
Tensor scatter_last(const Tensor& g, const Tensor& index, int64_t n);
/// The mean and the biased variance (divided by the count) of x over `axes`, as Keras'
/// ops.moments; computed in two passes (the squares around the mean).
std::pair<Tensor, Tensor> moments(const Tensor& x, const std::vector<int64_t>& axes,
                                  bool keepdims = false);
/// (x - mean) / sqrt(variance + epsilon) * gamma + beta, with per-channel mean, variance,
/// gamma and beta of shape (channels,) broadcast along `axis` (gamma and beta may be undefined:
/// no scale, no offset). What BatchNormalization applies with the batch's or the moving
/// statistics.
Tensor batch_norm(const Tensor& x, const Tensor& mean, const Tensor& variance,
                  const Tensor& gamma = {}, const Tensor& beta = {}, int64_t axis = -1,
                  double epsilon = 1e-3);
/// Keras LayerNormalization over one axis: each sample normalized by its own moments along
/// `axis`, then scaled by gamma and offset by beta (channels,), either may be undefined.
Tensor layer_norm(const Tensor& x, const Tensor& gamma = {}, const Tensor& beta = {},
                  int64_t axis = -1, double epsilon = 1e-3);
/// Keras Embedding's lookup: the rows of `table` (input_dim, output_dim) at int32/int64
/// `indices` of any shape, (..., output_dim). Its gradient is a deterministic scatter-add into
/// the table. An index outside [0, input_dim) is a ValueError naming it on the CPU; a CUDA
/// kernel cannot throw, so there the row is left zero and the ValueError is raised at the next
/// synchronization (as for gather_last).
Tensor embedding(const Tensor& table, const Tensor& indices);
/// One fused LSTM step. z: (batch, 4*units) pre-activations in Keras gate order (i, f, c, o),
/// c_prev: (batch, units). Returns {h, c}.
std::pair<Tensor, Tensor> lstm_cell(const Tensor& z, const Tensor& c_prev,
                                    Activation activation = Activation::Tanh,
                                    Activation recurrent_activation = Activation::Sigmoid);
/// A whole LSTM sequence from a zero state, in one op (one recurrent GEMM and one fused gate
/// pass per step; the recurrent kernel's gradient as one GEMM over all steps). xw: (batch,
/// steps, 4*units) input projections x W + b in Keras gate order (i, f, c, o); recurrent_kernel:
/// (units, 4*units). Returns the states h (batch, steps, units), aligned with the input steps
/// also when `reverse` processes them last to first.
Tensor lstm_sequence(const Tensor& xw, const Tensor& recurrent_kernel,
                     Activation activation = Activation::Tanh,
                     Activation recurrent_activation = Activation::Sigmoid, bool reverse = false);
/// A whole GRU sequence in Keras' reset_after form from a zero state, in one op (as
/// lstm_sequence). xw: (batch, steps, 3*units) input projections x W + b_input in Keras gate
/// order (z, r, h); recurrent_kernel (units, 3*units), recurrent_bias (3*units). Returns the
/// states h (batch, steps, units), aligned with the input steps also when `reverse`.
Tensor gru_sequence(const Tensor& xw, const Tensor& recurrent_kernel, const Tensor& recurrent_bias,
                    Activation activation = Activation::Tanh,
                    Activation recurrent_activation = Activation::Sigmoid, bool reverse = false);
/// A whole LSTM or GRU sequence in the fused op `op` of a backend's library (cuDNN's, oneDNN's:
/// fused_recurrence_op in ops/registry.h) from a zero state: x (batch, steps, features), the
/// kernel, recurrent kernel and bias as the layer holds them. Returns the states of every step
/// (batch, steps, units) and the last one (batch, units).
std::pair<Tensor, Tensor> fused_recurrence(const OpDef& op, const Tensor& x, const Tensor& kernel,
                                           const Tensor& recurrent_kernel, const Tensor& bias,
                                           Activation activation, Activation recurrent_activation);
/// One fused GRU step in Keras' reset_after form. xz = x_t W + b_input and hz = h_prev R +
/// b_recurrent: (batch, 3*units) in Keras gate order (z, r, h); h_prev: (batch, units).
/// Returns the new state z * h_prev + (1 - z) * activation(xz_h + r * hz_h).
Tensor gru_cell(const Tensor& xz, const Tensor& hz, const Tensor& h_prev,
                Activation activation = Activation::Tanh,
                Activation recurrent_activation = Activation::Sigmoid);

}  // namespace encore
