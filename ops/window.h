// Sliding windows along one axis, shared by convolutions, pools and the windowed view (unfold):
// how a padding spec resolves to left/right amounts, how many windows fit (checked once, here),
// and the index formula of a window's gradient, used by the CPU and CUDA kernels alike.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "core/error.h"
#include "core/host_device.h"

namespace encore {

/// Padding of a sliding window: Keras 'valid', 'same' and 'causal' (convolutions only: all the
/// padding on the left, so step t sees no later step), or explicit left/right amounts.
struct Padding {
  enum Kind { Valid, Same, Causal, Explicit } kind = Valid;
  int64_t left = 0, right = 0;
  static Padding valid() { return {Valid, 0, 0}; }
  static Padding same() { return {Same, 0, 0}; }
  static Padding causal() { return {Causal, 0, 0}; }
  static Padding explicit_(int64_t left, int64_t right) { return {Explicit, left, right}; }
  /// "valid", "same" or "causal"; a ValueError naming `op` otherwise.
  static Padding parse(const std::string& s, const char* op);
};

/// The steps a window covers, (window - 1) * dilation + 1; a ShapeError naming `op` on overflow.
int64_t window_span(const char* op, int64_t window, int64_t dilation);
/// Resolves `padding` to (left, right) amounts for an input of `length` steps. 'same' gives
/// ceil(length / stride) windows with the extra step on the right, as Keras does.
std::pair<int64_t, int64_t> window_padding(const char* op, int64_t length, int64_t window,
                                           int64_t stride, int64_t dilation, Padding padding);
/// How many windows fit, `stride` apart, in `length` steps padded by (pad_l, pad_r). A
/// ShapeError naming `op` when not one does or the sizes overflow int64: a window never reads
/// past the padded input, whatever the stride.
int64_t window_out_length(const char* op, int64_t length, int64_t window, int64_t stride,
                          int64_t dilation, int64_t pad_l, int64_t pad_r);

/// unfold and its gradient.
struct UnfoldAttrs {
  int axis;
  int64_t size, step;
  int64_t length;  // unfold_backward: the input's length along `axis`
  std::string str() const { return detail::cat("axis=", axis, ", size=", size, ", step=", step); }
  bool operator==(const UnfoldAttrs&) const = default;
};

/// `windows` windows of `size` steps, `step` apart, starting at step 0 (unfold's view).
struct WindowGeometry {
  int64_t windows, size, step;
  /// The window that reads step i as its entry k, or -1 when none does.
  ENCORE_HD int64_t window_of(int64_t i, int64_t k) const {
    const int64_t start = i - k;
    if (start < 0 || start % step != 0 || start / step >= windows) return -1;
    return start / step;
  }
};

}  // namespace encore
