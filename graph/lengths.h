// The valid lengths of a bucketed call, as the traced function sees them. A bucketed trace
// (graph/bucket.h) pads its arguments along one axis and passes the call's true length into
// the graph as one more input, an int64 (1,) tensor: a replay with another length of the same
// bucket binds a new value and never retraces. While the function traces, this context maps
// each tensor known to carry the padded axis to the symbolic valid length along it; layers
// read it to mask (nn: Module::output_lengths, the recurrent layers, pooling, losses) and
// register their outputs. Outside a bucketed trace (eager calls, exact traces) nothing is
// registered and every layer computes as it always does.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ops/tensor.h"

namespace encore::graph {

/// A tensor's valid extent along the padded axis.
struct Lengths {
  Tensor length;  // int64 (1,): the valid entries along `axis` (symbolic while tracing)
  int axis = 0;
  /// The same on the host, from the call's length along the bucketed axis: what an output
  /// is trimmed to.
  std::function<int64_t(int64_t)> of_call;
};

/// Active while a bucketed function traces (one per thread; nested scopes restore the outer).
class LengthScope {
 public:
  /// Told of every registration in this scope: the tensor, its lengths, and whether a mask wrote
  /// its padded entries (mask_padding) rather than leaving them undefined. The trace records
  /// these for the bucket probe (graph/probe.h).
  using OnRegister = std::function<void(const Tensor& t, const Lengths& lengths, bool masked)>;
  explicit LengthScope(OnRegister on_register = {});
  ~LengthScope();
  LengthScope(const LengthScope&) = delete;
  LengthScope& operator=(const LengthScope&) = delete;
  struct State;  // the registry (graph/lengths.cpp)

 private:
  State* previous_;
  State* state_;
};

/// The valid lengths of `t` along the padded axis; nullopt outside a bucketed trace or when
/// nothing registered `t` (it may not carry the axis: a layer without a rule, user code).
std::optional<Lengths> lengths_of(const Tensor& t);
/// Registers `t` as carrying the padded axis with `lengths` (no effect outside a scope). Its
/// entries past the valid length are padding that no result may depend on: the bucket probe
/// overwrites them with other values and refuses the bucket if a result changes. `masked`: a mask
/// wrote them (mask_padding), and a reader may use them (a 'same' convolution reads its zeros
/// as eager's implicit padding).
void set_lengths(const Tensor& t, Lengths lengths, bool masked = false);

/// Records that the bucketed function is exact only in distribution, not bitwise, and why (a
/// training-mode dropout draws its mask over the padded shape, so the real entries get other
/// random numbers than in the eager call). The trace warns with it once (no effect outside a
/// scope).
void note_inexact(std::string why);
/// The notes recorded in the innermost scope, each once.
std::vector<std::string> inexact_notes();

/// `in` when `y` has the axis with `x`'s extent on it (a per-step layer), else nullopt.
std::optional<Lengths> same_lengths(const Lengths& in, const Tensor& x, const Tensor& y);

/// `lengths` for a tensor whose axis shrank by a window: `size` entries `dilation` apart,
/// `stride` apart, with `left` fixed padding ('valid': 0, 'causal': (size - 1) * dilation). Its
/// `of_call` is 0 at a call length where no window fits (eager refuses or returns nothing there;
/// the bucket serves only longer calls).
Lengths window_lengths(const Lengths& in, int64_t size, int64_t stride, int64_t dilation,
                       int64_t left);

/// `x` with the entries past its valid length along `axis` set to `value` (x itself when it
/// has no registered lengths along `axis`).
Tensor mask_padding(const Tensor& x, int axis, double value = 0.0);

/// moments(x, axes) over the valid entries only when `x` carries the padded axis among `axes`
/// (BatchNormalization's batch statistics).
std::pair<Tensor, Tensor> valid_moments(const Tensor& x, const std::vector<int64_t>& axes);

/// The mean of `v` (elements or rows of a loss) over its valid entries when it carries the
/// padded axis as `like` does (same extent on that axis); else mean(v).
Tensor valid_mean(const Tensor& v, const Tensor& like);

}  // namespace encore::graph
