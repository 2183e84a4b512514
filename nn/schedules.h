// Learning-rate schedules: the rate as a function of the number of updates done before (0 for
// the first update).
//
// A schedule runs on the host. Before each step, outside the traced function, the caller sets
// the optimizer's rate: `opt.set_lr(schedule(step))` in a hand-written loop, the
// LearningRateScheduler callback in Model::fit. The rate lives in a device scalar that the
// fused update reads (nn/optim.h), so a traced step replays with every new rate and never
// retraces, and eager and traced runs see the same double. (Computing the rate inside the
// graph from a device step counter would need ops for every formula, cos among them, and would
// fix the schedule into the graph.)
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace encore::nn {

class Schedule {
 public:
  /// Any function of the step; `description` names it in messages.
  Schedule(std::function<double(int64_t)> fn, std::string description);

  double operator()(int64_t step) const { return fn_(step); }
  const std::string& str() const { return description_; }

  /// initial * gamma^floor(step / step_size)  (PyTorch's StepLR).
  static Schedule step_decay(double initial, int64_t step_size, double gamma);
  /// initial * rate^(step / decay_steps), the exponent floored with `staircase` (Keras'
  /// ExponentialDecay).
  static Schedule exponential_decay(double initial, int64_t decay_steps, double rate,
                                    bool staircase = false);
  /// initial * ((1 - alpha) * (1 + cos(pi * min(step, decay_steps) / decay_steps)) / 2 + alpha)
  /// (Keras' CosineDecay without warm-up).
  static Schedule cosine_decay(double initial, int64_t decay_steps, double alpha = 0.0);
  /// A linear warm-up from `start` to after(0) over `steps` steps, then after(step - steps).
  static Schedule warmup(Schedule after, int64_t steps, double start = 0.0);

 private:
  std::function<double(int64_t)> fn_;
  std::string description_;
};

}  // namespace encore::nn
