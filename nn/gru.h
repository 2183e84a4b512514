// GRU with Keras semantics: gate order z (update), r (reset), h (candidate) in the kernel
// (features, 3 units), the recurrent kernel (units, 3 units) and the bias, and
//   z = rec(x W_z + h R_z + b), r = rec(x W_r + h R_r + b), h' = z * h + (1 - z) * hh, with
//   reset_after=True (default; bias (2, 3 units): input row, recurrent row):
//     hh = act(x W_h + b_in_h + r * (h R_h + b_rec_h))
//   reset_after=False (bias (3 units)): hh = act(x W_h + b_h + (r * h) R_h).
// Two implementations give the same results within float tolerance: composed (one GEMM for
// all input projections, then gru_sequence, or with reset_after=False per step two GEMMs and
// elementwise ops; any activation) and fused (one op over the sequence, tanh/sigmoid,
// reset_after, float32: cudnn_gru on a CUDA device, onednn_gru, oneDNN's linear-before-reset GRU,
// on the CPU; `implementation=Composed` forces the composed ops).
#pragma once

#include <utility>

#include "nn/recurrent.h"
#include "ops/activation.h"
#include "ops/op.h"

namespace encore::nn {

#define ENCORE_GRU_OPTIONS(X)                                                                      \
  X(std::string, activation, "tanh", "of the candidate state, by name (not softmax)")              \
  X(std::string, recurrent_activation, "sigmoid", "of the gates z, r, by name (not softmax)")      \
  X(bool, return_sequences, false,                                                                 \
    "return the state of every step (batch, steps, units), not "                                   \
    "only the last (batch, units)")                                                                \
  X(bool, return_state, false,                                                                     \
    "also return the last state (call_with_state; Python's call "                                  \
    "returns (output, state))")                                                                    \
  X(bool, go_backwards, false,                                                                     \
    "process the steps last to first; a sequence output is then in "                               \
    "processing order (reversed), as in Keras")                                                    \
  X(bool, reset_after, true,                                                                       \
    "apply the reset gate after the recurrent GEMM (cuDNN's GRU, Keras' "                          \
    "default; bias (2, 3 units)), else before it (bias (3 units))")                                \
  X(RecurrentImplementation, implementation, RecurrentImplementation::Auto,                        \
    "'auto': fused (cuDNN on a CUDA device, oneDNN on the CPU) for tanh/sigmoid with reset_after " \
    "on "                                                                                          \
    "float32 input without bucketing lengths, else composed; 'composed' or 'cudnn' to force one")
ENCORE_LAYER_OPTIONS(GRUOptions, ENCORE_GRU_OPTIONS);

class GRU : public Recurrent {
 public:
  explicit GRU(int64_t units, GRUOptions options = {});
  std::string type_name() const override { return "gru"; }
  std::shared_ptr<Recurrent> reversed() const override;
  bool reverses_sequence_output() const override {
    return options_.go_backwards && options_.return_sequences;
  }
  int64_t units() const { return units_; }
  const GRUOptions& options() const { return options_; }
  /// Whether a forward on `x` takes the cuDNN path.
  bool uses_cudnn(const Tensor& x) const;
  /// Whether a forward on `x` takes oneDNN's GRU (the CPU's fused path).
  bool uses_onednn(const Tensor& x) const;
  /// The output (as forward()) and the last state (batch, units).
  std::pair<Tensor, Tensor> call_with_state(const Tensor& x);

 protected:
  Shape build_impl(const Shape& input_shape) override;
  Tensor forward_impl(const Tensor& x) override;
  std::optional<graph::Lengths> output_lengths(const graph::Lengths& in, const Tensor& x,
                                               const Tensor& y) const override;

 private:
  std::pair<Tensor, Tensor> run(const Tensor& x);
  std::pair<Tensor, Tensor> run_sequence(const Tensor& x);
  std::pair<Tensor, Tensor> run_steps(const Tensor& x);
  /// The fused op a forward on `x` runs (the registry's GRU for its device: cudnn_gru,
  /// onednn_gru); null: the composed path.
  const OpDef* fused_op(const Tensor& x) const;
  std::pair<Tensor, Tensor> run_fused(const Tensor& x, const OpDef& fused);
  std::pair<Tensor, Tensor> valid_outputs(const Tensor& y, const Tensor& length) const;

  int64_t units_;
  GRUOptions options_;
  Activation activation_, recurrent_activation_;
  Tensor kernel_, recurrent_kernel_, bias_;
};

}  // namespace encore::nn
