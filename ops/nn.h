// Neural-network building blocks: the attributes of dropout, scatter_last and the fused LSTM
// and GRU cells (LstmAttrs: their two activations), shared by the CPU and CUDA kernels
// (softmax takes AxisAttrs, ops/data.h).
#pragma once

#include <string>

#include "ops/activation.h"
#include "ops/data.h"

namespace encore {

struct DropoutAttrs {
  double p;
  std::string str() const { return detail::cat("rate=", p); }
  bool operator==(const DropoutAttrs&) const = default;
};
struct ScatterAttrs {
  int64_t n;  // size of the last axis to scatter into
  std::string str() const { return detail::cat("n=", n); }
  bool operator==(const ScatterAttrs&) const = default;
};
struct LstmAttrs {
  Activation activation, recurrent_activation;
  std::string str() const {
    return detail::cat("activation=", name(activation),
                       ", recurrent_activation=", name(recurrent_activation));
  }
  bool operator==(const LstmAttrs&) const = default;
};
/// A whole recurrent sequence (lstm_sequence, gru_sequence): the activations and the direction.
struct RecurrenceAttrs {
  Activation activation, recurrent_activation;
  bool reverse;
  std::string str() const {
    return detail::cat("activation=", name(activation),
                       ", recurrent_activation=", name(recurrent_activation),
                       ", reverse=", reverse);
  }
  bool operator==(const RecurrenceAttrs&) const = default;
};

}  // namespace encore
