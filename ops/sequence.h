// Ops over the valid prefix of sequences of different lengths (a bucketed call's padding, see
// graph/bucket.h): their attributes and the index formula the CPU and CUDA kernels share.
#pragma once

#include <cstdint>
#include <string>

#include "core/error.h"
#include "core/host_device.h"

namespace encore {

/// reverse_sequence and mask_sequence: the sequence axis, and the value mask_sequence writes.
struct SequenceAttrs {
  int axis;
  double value;
  std::string str() const { return detail::cat("axis=", axis, ", value=", value); }
  bool operator==(const SequenceAttrs&) const = default;
};

namespace seq {

/// A length as the kernels use it: clamped to the axis (a CUDA kernel cannot raise).
ENCORE_HD int64_t clamp_length(int64_t length, int64_t n) {
  return length < 0 ? 0 : length > n ? n : length;
}
/// Where entry j of a reverse_sequence output comes from: the valid prefix reversed, the rest
/// in place.
ENCORE_HD int64_t reversed_source(int64_t j, int64_t length) {
  return j < length ? length - 1 - j : j;
}
/// The row of `lengths` that entry `outer` (an index over the axes before the sequence axis)
/// reads: one length for every row, or one per entry of axis 0.
ENCORE_HD int64_t length_row(int64_t outer, int64_t outer_count, int64_t batch, int64_t lengths) {
  return lengths == 1 ? 0 : outer / (outer_count / batch);
}

}  // namespace seq
}  // namespace encore
