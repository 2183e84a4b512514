// LSTM (Keras semantics, gate order i, f, c, o) and the Bidirectional wrapper.
//
// Two implementations give the same results within float tolerance:
//  - composed: one GEMM for all input projections, then per step a recurrent GEMM and one
//    fused gate kernel (lstm_cell). Any activation (the benchmark models use relu).
//  - cuDNN: one cudnn_lstm op over the whole sequence (CUDA, tanh/sigmoid only).
// Their costs differ instructively: eager pays dispatch per step for the composed path, a
// replayed graph does not.
#pragma once

#include "nn/module.h"
#include "ops/activation.h"

namespace encore::nn {

enum class LSTMImplementation { Auto, Composed, Cudnn };

struct LSTMOptions {
  std::string activation = "tanh";
  std::string recurrent_activation = "sigmoid";
  bool return_sequences = false;
  /// Process the sequence from the last step to the first. Outputs stay aligned with the
  /// input steps (unlike Keras' go_backwards, which returns them reversed).
  bool reverse = false;
  bool unit_forget_bias = true;
  /// Auto: cuDNN on a CUDA device when the activations are tanh/sigmoid, else composed.
  LSTMImplementation implementation = LSTMImplementation::Auto;
};

class LSTM : public Module {
 public:
  explicit LSTM(int64_t units, LSTMOptions options = {});
  std::string type_name() const override { return "lstm"; }
  int64_t units() const { return units_; }
  const LSTMOptions& options() const { return options_; }
  /// Whether a forward on `x` takes the cuDNN path.
  bool uses_cudnn(const Tensor& x) const;

 protected:
  Shape build_impl(const Shape& input_shape) override;
  Tensor forward_impl(const Tensor& x) override;

 private:
  Tensor forward_composed(const Tensor& x);
  Tensor forward_cudnn(const Tensor& x);

  int64_t units_;
  LSTMOptions options_;
  Activation activation_, recurrent_activation_;
  Tensor kernel_, recurrent_kernel_, bias_;
};

/// Runs a forward and a reversed copy of an LSTM and merges their outputs
/// ("concat" on the feature axis, "sum", "mul" or "ave").
class Bidirectional : public Module {
 public:
  explicit Bidirectional(std::shared_ptr<LSTM> layer, std::string merge_mode = "concat");
  std::string type_name() const override { return "bidirectional"; }

 protected:
  Shape build_impl(const Shape& input_shape) override;
  Tensor forward_impl(const Tensor& x) override;

 private:
  std::shared_ptr<LSTM> forward_, backward_;
  std::string merge_mode_;
};

}  // namespace encore::nn
