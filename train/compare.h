// encore::compare_modes: what eager execution, traced replay, retracing and bucketing cost on
// the user's own training step and data.
//
//   CompareReport r = compare_modes(model, nn::binary_crossentropy, adam, BatchSource::of({x, y}),
//                                   {.modes = {"eager", "traced"}, .steps = 30});
//   std::cout << r.table();          // one row per mode; r.json() for the same as JSON
//
// Modes (CompareOptions::modes):
//   eager, traced                    fixed-shape batches (cycled), the step run eagerly / traced
//   eager_new_length,                a new length every call (CompareOptions::length: the
//   traced_new_length                schedule, by default one step longer each call, or lengths
//                                    drawn from any distribution): per-shape setup, a retrace
//   bucket                           the same lengths, traced with ShapePolicy::bucket(buckets);
//                                    refused (the row says why) when padding cannot be made exact
//   predict_eager, predict_traced    the forward pass only (CompareOptions::predict, or the
//                                    model), in inference mode without gradients
//
// Each mode runs with per-shape state of its own (kernel states, RNN setups, autotune choices;
// ops/prepared.h): it starts without any and never finds a shape another mode set up, so it
// pays every setup it would pay alone, whatever the other modes and their order. The modes take
// their steps in turn (one step of each, round after round), so whatever else the machine does
// hits them alike, and the median is taken after `warmup` rounds. A profiled pass splits each
// step into kernel time and framework overhead, and measures input copy-in (padding included;
// medians over its steps). The caller's per-shape state is put back afterwards.
//
// State: the step trains whatever it trains. The model + loss + optimizer form restores the
// parameters and the optimizer state afterwards (slots the optimizer created meanwhile are
// zeroed: a fresh optimizer's state); the step form restores the tensors in
// CompareOptions::state, and the report says `trained` when it restored nothing. Both restore
// when the comparison fails too. Random generators advance either way.
#pragma once

#include "core/cxx20.h"

#include <functional>
#include <string>
#include <vector>

#include "graph/trace.h"
#include "nn/module.h"
#include "nn/optim.h"

namespace encore {

/// One batch: the step's tensor arguments, in order.
using Batch = std::vector<Tensor>;
using Step = std::function<std::vector<Tensor>(const Batch&)>;
using LossFn = std::function<Tensor(const Tensor& y_true, const Tensor& y_pred)>;

/// Where batches come from: fixed batches (cycled by the fixed-shape modes), and a function
/// that makes a batch of a given length (needed by the new-length and bucket modes).
struct BatchSource {
  std::vector<Batch> batches;
  std::function<Batch(int64_t length)> make = {};

  static BatchSource of(Batch batch) { return {{std::move(batch)}}; }
  static BatchSource of(std::vector<Batch> batches) { return {std::move(batches)}; }
  /// Fixed batches are make(length); the variable-length modes call make with other lengths.
  static BatchSource of(std::function<Batch(int64_t)> make, int64_t length);
};

struct CompareOptions {
  std::vector<std::string> modes = {"eager", "traced"};
  int steps = 30;         // measured rounds
  int warmup = 3;         // rounds before the median
  int profile_steps = 5;  // profiled steps per mode (kernel time vs overhead, copy-in)
  /// The variable-length modes' length at call i (0-based); default: one longer than the
  /// fixed batches' length at every call.
  std::function<int64_t(int64_t call)> length = {};
  int length_axis = 1;                 // the axis that varies, in the arguments below
  std::vector<int> length_args = {0};  // which batch tensors have it (bucketing pads these)
  std::vector<int64_t> buckets = {};   // the bucket mode's sizes
  /// The predict modes' forward pass; the model form uses the model.
  Step predict = {};
  /// The step form: tensors to restore afterwards (parameters, optimizer state).
  std::vector<Tensor> state = {};
  std::string name = "step";
  std::vector<std::string> arg_names = {};
  /// Passed on to the traced functions (warnings, the host language's garbage collector).
  std::function<void(const std::string&)> on_warning = {};
  std::function<void()> collect_garbage = {};
};

struct ModeReport {
  std::string mode;
  std::string baseline;  // the eager mode a traced one is compared with ("" for eager modes)
  std::string error;     // why the mode could not run (a refused bucket policy); nothing else set
  double first_call_ms = 0, step_ms_median = 0;
  std::vector<double> step_ms;  // every call, the first included
  /// Per step, from a profiled pass of the fixed-shape modes (NaN otherwise; copy-in: traced
  /// modes only, padding included).
  double kernel_ms = 0, overhead_ms = 0, copy_in_ms = 0;
  /// Per-shape setups (primitive creations, algorithm searches: the ledger's autotunes) and
  /// their time, and traces (the ledger's count, so a step that makes traced functions of its
  /// own, Model::predict or a new one per call, shows them too), over all the mode's calls
  /// (first, warm-up and measured; not the profiled pass).
  double setup_ms = 0;
  int64_t setups = 0, calls = 0, traces = 0;
  /// The per-shape algorithm choices the mode's first call made (autotune::entries()), each
  /// "op: algorithm (key)": which implementation ran each convolution.
  std::vector<std::string> algorithms;
  double trace_ms_total = 0;  // trace + optimize + plan + capture over every trace
  std::vector<TraceRecord> records;
  std::vector<AxisValues> axis_values;
  int64_t arena_bytes = 0;  // the latest trace's arena
  int64_t peak_bytes =
      0;  // most bytes allocated at once during one steady step, above what was live before
  int64_t real_elements = 0, padding_elements = 0;  // bucket: elements called with, zeros added
  int64_t retraces_saved = 0;  // bucket: calls at a new length that replayed (TraceStats)
  /// What the mode's one-off work cost beyond its median: the first call, and each call that
  /// traced or set up a shape, less the median each; where most calls did (a new shape every
  /// call), the first call alone, the rest being the mode's cost per call.
  double one_off_ms = 0;
  /// The call after which this mode's total time (one_off_ms + calls x median) is at most its
  /// baseline's: 1 when it is after one call, -1 never, 0 for eager modes.
  int64_t break_even_step = 0;
  double speedup = 0;  // baseline median / this median
  /// Communication per timed step (means after warm-up; zero without collectives): collectives
  /// run and bytes sent from this rank, time the engine spent in them, and the part of it the
  /// step's compute hid (the engine's time minus the time the step waited for it).
  double comm_calls = 0, comm_bytes = 0, comm_ms = 0, comm_hidden_ms = 0;
};

struct CompareReport {
  std::string name, device;
  int steps = 0;
  bool trained = false;  // the comparison trained the user's model / state and did not restore it
  std::vector<std::string> restored;  // what it restored
  std::vector<ModeReport> modes;

  const ModeReport& operator[](const std::string& mode) const;
  /// One row per mode, then each traced mode's trace reasons.
  std::string table() const;
  std::string json() const;
};

/// Compares the modes on `step`, a whole training step over one batch.
CompareReport compare_modes(const Step& step, const BatchSource& data, CompareOptions options = {});
/// The same for the step zero_grad; loss(y, model(x)).backward(); optimizer.step() over
/// batches (x, y) of a built model, the optimizer holding all its trainable parameters;
/// restores the parameters and the optimizer state afterwards.
CompareReport compare_modes(nn::Module& model, const LossFn& loss, nn::Optimizer& optimizer,
                            const BatchSource& data, CompareOptions options = {});

}  // namespace encore
