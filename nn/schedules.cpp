#include "nn/schedules.h"

#include <cmath>
#include <numbers>

#include "core/error.h"

namespace encore::nn {

namespace {
void check_steps(const char* what, int64_t steps) {
  ENCORE_CHECK(steps >= 1, ValueError, "[", what, "] needs a number of steps >= 1, got ", steps);
}
void check_step(int64_t step) {
  ENCORE_CHECK(step >= 0, ValueError, "[schedule] the step must be >= 0, got ", step);
}
}  // namespace

Schedule::Schedule(std::function<double(int64_t)> fn, std::string description)
    : fn_(std::move(fn)), description_(std::move(description)) {
  ENCORE_CHECK(fn_, ValueError, "[schedule] no function");
}

Schedule Schedule::step_decay(double initial, int64_t step_size, double gamma) {
  check_steps("step_decay", step_size);
  return {[=](int64_t step) {
            check_step(step);
            return initial * std::pow(gamma, static_cast<double>(step / step_size));
          },
          detail::cat("step_decay(", initial, ", step_size=", step_size, ", gamma=", gamma, ")")};
}

Schedule Schedule::exponential_decay(double initial, int64_t decay_steps, double rate,
                                     bool staircase) {
  check_steps("exponential_decay", decay_steps);
  return {[=](int64_t step) {
            check_step(step);
            double p = static_cast<double>(step) / static_cast<double>(decay_steps);
            if (staircase) p = std::floor(p);
            return initial * std::pow(rate, p);
          },
          detail::cat("exponential_decay(", initial, ", decay_steps=", decay_steps, ", rate=", rate,
                      staircase ? ", staircase" : "", ")")};
}

Schedule Schedule::cosine_decay(double initial, int64_t decay_steps, double alpha) {
  check_steps("cosine_decay", decay_steps);
  return {
      [=](int64_t step) {
        check_step(step);
        const double p =
            static_cast<double>(std::min(step, decay_steps)) / static_cast<double>(decay_steps);
        return initial * ((1 - alpha) * 0.5 * (1 + std::cos(std::numbers::pi * p)) + alpha);
      },
      detail::cat("cosine_decay(", initial, ", decay_steps=", decay_steps, ", alpha=", alpha, ")")};
}

Schedule Schedule::warmup(Schedule after, int64_t steps, double start) {
  check_steps("warmup", steps);
  const std::string description =
      detail::cat("warmup(", steps, " steps from ", start, ", then ", after.str(), ")");
  return {[after = std::move(after), steps, start](int64_t step) {
            check_step(step);
            if (step >= steps) return after(step - steps);
            return start +
                   (after(0) - start) * static_cast<double>(step) / static_cast<double>(steps);
          },
          description};
}

}  // namespace encore::nn
