// The one dispatcher. Every op call goes through `dispatch`: shape inference, then either
// run the backend kernel now (eager) or append a node to the active trace (no kernel runs),
// then record the autograd tape. Both backends and both modes share this path.
#pragma once

#include <initializer_list>

#include "ops/registry.h"

namespace encore {

/// The outputs of one op call (at most kMaxOutputs).
struct OutList {
  std::array<Tensor, kMaxOutputs> t;
  int n = 0;
  Tensor& operator[](int i) { return t[i]; }
  const Tensor& operator[](int i) const { return t[i]; }
};

OutList dispatch(const OpDef& op, std::span<const Tensor> in, const Attrs& attrs = {});

/// First output of an op call, for the common single-output case.
inline Tensor call(const OpDef& op, std::initializer_list<Tensor> in, const Attrs& attrs = {}) {
  return dispatch(op, {in.begin(), in.size()}, attrs)[0];
}

/// The kernel view of a tensor with data.
TensorRef ref(const Tensor& t);

/// Runs a CPU kernel timed, for profiling: its time goes to the ledger's kernel time and to a
/// "kernel" event whose args name the op, the inputs' and outputs' shapes and dtypes, the bytes
/// they hold and the implementation its prepared state chose (where the kernel describes it).
/// Eager calls and replays both run their kernels through it while profiling is on.
void run_profiled(const OpDef& def, Device device, KernelFn kernel, const KernelCtx& ctx);

/// The ops the graph layer emits itself: a copy into a new tensor (Plan outputs), and an
/// in-place copy (gradients into persistent buffers, argument write-back, copy elision).
const OpDef& copy_op_def();
const OpDef& copy_inplace_op_def();

/// Receives op calls instead of running them: the graph layer's tracer installs one on its
/// thread while it records. No kernel runs; outputs are symbolic tensors it makes.
class Recorder {
 public:
  virtual ~Recorder() = default;
  virtual Tensor make_output(const TensorMeta& meta) = 0;
  virtual void record(const OpDef& op, const Attrs& attrs, std::span<const Tensor> in,
                      std::span<const Tensor> out) = 0;
  /// A view of `base` was made: views run nothing and are not recorded, but a captured tensor
  /// that reaches the graph only through its views must still be guarded (set_data).
  virtual void on_view(const Tensor& base) = 0;
};
/// The recorder of this thread (null: ops run eagerly).
Recorder* recorder();
void set_recorder(Recorder* r);

/// Called for every differentiable op call that has an input requiring grad while grad mode
/// is on, after its outputs exist; autograd installs it to record its tape.
using TapeHook = void (*)(const OpDef& op, const Attrs& attrs, std::span<const Tensor> in,
                          std::span<Tensor> out);
void set_tape_hook(TapeHook hook);

/// Runs the backward pass from `root` with a gradient of its shape, dtype and device:
/// Tensor::backward calls it; autograd installs it.
using BackwardHook = void (*)(const Tensor& root, const Tensor& grad);
void set_backward_hook(BackwardHook hook);

}  // namespace encore
