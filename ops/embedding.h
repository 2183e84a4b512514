// The embedding family's attributes and index check, shared by its rows and CPU kernels
// (ops/defs/embedding.cpp) and its CUDA kernels (ops/cuda/embedding.cu).
#pragma once

#include "core/error.h"
#include "core/host_device.h"

namespace encore {

/// embedding_backward: the rows of the table the gradient is scattered into.
struct EmbeddingAttrs {
  int64_t input_dim;
  std::string str() const { return detail::cat("input_dim=", input_dim); }
  bool operator==(const EmbeddingAttrs&) const = default;
};

/// Whether `index` names a row of a table with `input_dim` rows.
ENCORE_HD bool embedding_row(int64_t index, int64_t input_dim) {
  return index >= 0 && index < input_dim;
}

}  // namespace encore
