#include "nn/gru.h"

#include "nn/init.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace encore::nn {

GRU::GRU(int64_t units, GRUOptions options)
    : units_(units),
      options_(std::move(options)),
      activation_(parse_activation(options_.activation)),
      recurrent_activation_(parse_activation(options_.recurrent_activation)) {
  ENCORE_CHECK(units >= 1, ValueError, "[gru] units must be >= 1, got ", units);
}

Shape GRU::build_impl(const Shape& s) {
  ENCORE_CHECK(s.size() == 3, ShapeError, "[gru] expects input (batch, steps, features), got ",
               s.str());
  const int64_t in = s[2], u = units_;
  checked_numel({3, u, std::max(in, u)}, "gru");  // kernel (in, 3u) and recurrent kernel (u, 3u)
  kernel_ = add_parameter("kernel", init::glorot_uniform({in, 3 * u}, in, 3 * u));
  recurrent_kernel_ = add_parameter("recurrent_kernel", init::orthogonal(u, 3 * u));
  bias_ = add_parameter("bias", options_.reset_after ? zeros({2, 3 * u}) : zeros({3 * u}));
  return options_.return_sequences ? Shape{s[0], s[1], u} : Shape{s[0], u};
}

std::shared_ptr<Recurrent> GRU::reversed() const {
  GRUOptions o = options_;
  o.go_backwards = !o.go_backwards;
  return std::make_shared<GRU>(units_, o);
}

const OpDef* GRU::fused_op(const Tensor& x) const {
  // Neither library has empty problems: an empty batch takes the composed path, as does a
  // bucketed call (the valid lengths are a tensor there).
  const bool supported = !graph::lengths_of(x) && activation_ == Activation::Tanh &&
                         recurrent_activation_ == Activation::Sigmoid && options_.reset_after &&
                         x.dtype() == DType::Float32 && x.numel() > 0;
  const OpDef* fused = fused_recurrence_op(RecurrentCell::Gru, x.device().type);
  switch (options_.implementation) {
    case RecurrentImplementation::Composed:
      return nullptr;
    case RecurrentImplementation::Cudnn:
      ENCORE_CHECK(supported && x.device().is_cuda() && fused, UnsupportedError, "[", label(),
                   "] the cuDNN implementation needs non-empty float32 input on a CUDA device, "
                   "activation='tanh', recurrent_activation='sigmoid' and reset_after=True");
      return fused;
    case RecurrentImplementation::Auto:
      break;
  }
  return supported ? fused : nullptr;
}

bool GRU::uses_cudnn(const Tensor& x) const {
  const OpDef* fused = fused_op(x);
  return fused && fused->runs_on(DeviceType::CUDA);
}
bool GRU::uses_onednn(const Tensor& x) const {
  const OpDef* fused = fused_op(x);
  return fused && fused->runs_on(DeviceType::CPU);
}

std::pair<Tensor, Tensor> GRU::call_with_state(const Tensor& x) {
  prepare_forward(x);
  return run(x);
}

Tensor GRU::forward_impl(const Tensor& x) { return run(x).first; }

std::pair<Tensor, Tensor> GRU::run(const Tensor& x) {
  ENCORE_CHECK(x.dim() == 3 && x.shape()[2] == kernel_.shape()[0] && x.shape()[1] >= 1, ShapeError,
               "[", label(), "] input ", x.shape().str(), " must be (batch, steps >= 1, ",
               kernel_.shape()[0], ")");
  if (const OpDef* fused = fused_op(x)) return run_fused(x, *fused);
  return options_.reset_after ? run_sequence(x) : run_steps(x);
}

// reset_after=True: all input projections (with the input bias) in one GEMM, then the
// recurrence in one op.
std::pair<Tensor, Tensor> GRU::run_sequence(const Tensor& x) {
  const bool back = options_.go_backwards;
  const Tensor xw = matmul(x, kernel_) + bias_.slice(0, 0, 1).squeeze(0);
  if (const auto l = graph::lengths_of(x); l && l->axis == 1)
    return valid_outputs(
        gru_sequence(back ? reverse_sequence(xw, l->length) : xw, recurrent_kernel_,
                     bias_.slice(0, 1, 2).squeeze(0), activation_, recurrent_activation_, false),
        l->length);
  const Tensor y = gru_sequence(xw, recurrent_kernel_, bias_.slice(0, 1, 2).squeeze(0), activation_,
                                recurrent_activation_, back);
  const int64_t last = back ? 0 : x.shape()[1] - 1;
  const Tensor h = y.slice(1, last, last + 1).squeeze(1);
  // Keras returns a backward sequence in processing order.
  if (!options_.return_sequences) return {h, h};
  return {back ? flip(y, 1) : y, h};
}

// A bucketed call: `y` holds the states in processing order, run over each row's valid steps
// only (a backward layer over its valid prefix reversed), so the state never saw the padding.
// The sequence output is in processing order, as Keras returns it, zero at padded steps.
std::pair<Tensor, Tensor> GRU::valid_outputs(const Tensor& y, const Tensor& length) const {
  const Tensor h = reverse_sequence(y, length).slice(1, 0, 1).squeeze(1);
  return {options_.return_sequences ? mask_sequence(y, length) : h, h};
}

// reset_after=False: the reset gate multiplies h before its GEMM, so each step is composed of
// ops (one GEMM for all input projections first).
std::pair<Tensor, Tensor> GRU::run_steps(const Tensor& x) {
  const int64_t batch = x.shape()[0], steps = x.shape()[1], u = units_;
  const auto valid = graph::lengths_of(x);
  const bool by_length = valid && valid->axis == 1;
  Tensor xw = matmul(x, kernel_) + bias_;
  if (by_length && options_.go_backwards) xw = reverse_sequence(xw, valid->length);
  const Tensor r_zr = recurrent_kernel_.slice(1, 0, 2 * u),
               r_h = recurrent_kernel_.slice(1, 2 * u, 3 * u);
  Tensor h = zeros({batch, u}, x.dtype(), x.device());
  std::vector<Tensor> states;
  states.reserve(steps);
  for (int64_t s = 0; s < steps; ++s) {
    const int64_t t = options_.go_backwards && !by_length ? steps - 1 - s : s;
    const Tensor xt = xw.slice(1, t, t + 1).squeeze(1);
    const Tensor zr = activation(xt.slice(1, 0, 2 * u) + matmul(h, r_zr), recurrent_activation_);
    const Tensor z = zr.slice(1, 0, u), r = zr.slice(1, u, 2 * u);
    const Tensor hh = activation(xt.slice(1, 2 * u, 3 * u) + matmul(r * h, r_h), activation_);
    h = z * h + (1.0 - z) * hh;
    if (options_.return_sequences || by_length) states.push_back(h);
  }
  if (by_length) return valid_outputs(stack(states, 1), valid->length);
  return {options_.return_sequences ? stack(states, 1) : h, h};
}

std::pair<Tensor, Tensor> GRU::run_fused(const Tensor& x, const OpDef& fused) {
  const auto [y, h] =
      fused_recurrence(fused, options_.go_backwards ? flip(x, 1) : x, kernel_, recurrent_kernel_,
                       bias_, activation_, recurrent_activation_);
  return {options_.return_sequences ? y : h, h};
}

}  // namespace encore::nn

namespace encore::nn {
namespace {

const LayerDef& gru_layer = define_layer({
    .name = "GRU",
    .signature = "GRU(units: int)",
    .options = &GRUOptions::fields,
    .make = [](const CallArgs& a) -> LayerPtr {
      return std::make_shared<GRU>(a.integer(0), options_of<GRUOptions>(a));
    },
    .doc = "GRU with Keras semantics (gates z, r, h) over (batch, steps, features).",
    .example = {.args = "units=3, go_backwards=True, reset_after=False", .input = {{2, 5, 4}}},
});

}  // namespace
}  // namespace encore::nn
