// LSTM (Keras semantics, gate order i, f, c, o).
//
// Two implementations give the same results within float tolerance:
//  - composed: one GEMM for all input projections, then lstm_sequence: per step a recurrent
//    GEMM and one fused gate pass, inside one op. Any activation (the benchmark models use relu).
//  - fused: one op over the whole sequence, tanh/sigmoid only: cudnn_lstm on a CUDA device,
//    onednn_lstm (oneDNN's LSTM primitive) on the CPU.
#pragma once

#include "nn/recurrent.h"
#include "ops/activation.h"
#include "ops/op.h"

namespace encore::nn {

using LSTMImplementation = RecurrentImplementation;

#define ENCORE_LSTM_OPTIONS(X)                                                                     \
  X(std::string, activation, "tanh", "of the cell state and the candidate, by name (not softmax)") \
  X(std::string, recurrent_activation, "sigmoid", "of the gates i, f, o, by name (not softmax)")   \
  X(bool, return_sequences, false,                                                                 \
    "return the state of every step (batch, steps, units), not "                                   \
    "only the last (batch, units)")                                                                \
  X(bool, reverse, false,                                                                          \
    "process the steps last to first; outputs stay aligned with the input "                        \
    "steps (unlike Keras' go_backwards, which returns them reversed)")                             \
  X(bool, unit_forget_bias, true, "start the forget gate's bias at 1")                             \
  X(LSTMImplementation, implementation, LSTMImplementation::Auto,                                  \
    "'auto': fused (cuDNN on a CUDA device, oneDNN on the CPU) for tanh/sigmoid on float32 input " \
    "without bucketing lengths, else composed; 'composed' or 'cudnn' to force one")
ENCORE_LAYER_OPTIONS(LSTMOptions, ENCORE_LSTM_OPTIONS);

class LSTM : public Recurrent {
 public:
  explicit LSTM(int64_t units, LSTMOptions options = {});
  std::string type_name() const override { return "lstm"; }
  std::shared_ptr<Recurrent> reversed() const override;
  int64_t units() const { return units_; }
  const LSTMOptions& options() const { return options_; }
  /// Whether a forward on `x` takes the cuDNN path.
  bool uses_cudnn(const Tensor& x) const;
  /// Whether a forward on `x` takes oneDNN's LSTM (the CPU's fused path).
  bool uses_onednn(const Tensor& x) const;

 protected:
  Shape build_impl(const Shape& input_shape) override;
  Tensor forward_impl(const Tensor& x) override;
  std::optional<graph::Lengths> output_lengths(const graph::Lengths& in, const Tensor& x,
                                               const Tensor& y) const override;

 private:
  Tensor forward_composed(const Tensor& x);
  /// The fused op a forward on `x` runs (the registry's LSTM for its device: cudnn_lstm,
  /// onednn_lstm); null: the composed path.
  const OpDef* fused_op(const Tensor& x) const;
  Tensor forward_fused(const Tensor& x, const OpDef& fused);
  Tensor forward_valid(const Tensor& x, const Tensor& length);

  int64_t units_;
  LSTMOptions options_;
  Activation activation_, recurrent_activation_;
  Tensor kernel_, recurrent_kernel_, bias_;
};

}  // namespace encore::nn
