// What the recurrent layers (LSTM, GRU) share: the choice between the composed and the fused
// (cuDNN, oneDNN) implementation, the interface Bidirectional needs, and Bidirectional itself.
#pragma once

#include <memory>
#include <string>

#include "nn/layer.h"

namespace encore::nn {

/// Auto: the fused op (cuDNN on a CUDA device; for LSTM oneDNN on the CPU) where it computes the
/// layer's configuration, else composed. Composed forces the composed ops (tests, benchmarks).
enum class RecurrentImplementation { Auto, Composed, Cudnn };
/// Their names as options ('auto', 'composed', 'cudnn').
std::span<const char* const> option_names(RecurrentImplementation);

#define ENCORE_BIDIRECTIONAL_OPTIONS(X) \
  X(std::string, merge_mode, "concat",  \
    "how the two outputs combine: 'concat' (on the feature axis), 'sum', 'mul' or 'ave'")
ENCORE_LAYER_OPTIONS(BidirectionalOptions, ENCORE_BIDIRECTIONAL_OPTIONS);

/// A recurrent layer over (batch, steps, features) that Bidirectional can wrap.
class Recurrent : public Module {
 public:
  /// A new, unbuilt layer with the same configuration that runs over the steps in the other
  /// direction.
  virtual std::shared_ptr<Recurrent> reversed() const = 0;
  /// Whether its sequence output lists the steps last to first (Keras' go_backwards);
  /// Bidirectional flips such an output back into input order.
  virtual bool reverses_sequence_output() const { return false; }
};

/// Runs a recurrent layer and a reversed copy of it and merges their outputs
/// ("concat" on the feature axis, "sum", "mul" or "ave").
class Bidirectional : public Module {
 public:
  explicit Bidirectional(std::shared_ptr<Recurrent> layer, BidirectionalOptions options = {});
  std::string type_name() const override { return "bidirectional"; }

 protected:
  Shape build_impl(const Shape& input_shape) override;
  Tensor forward_impl(const Tensor& x) override;
  std::optional<graph::Lengths> output_lengths(const graph::Lengths& in, const Tensor& x,
                                               const Tensor& y) const override;

 private:
  std::shared_ptr<Recurrent> forward_, backward_;
  std::string merge_mode_;  // options.merge_mode, checked
};

}  // namespace encore::nn
