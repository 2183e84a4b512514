// Whether ops record the autograd tape. Thread-local, like the trace state.
#pragma once

namespace encore {

class GradMode {
 public:
  static bool enabled() { return enabled_; }
  static void set_enabled(bool on) { enabled_ = on; }

 private:
  static thread_local bool enabled_;
};

/// Disables tape recording for a scope (optimizer updates, evaluation).
class NoGradGuard {
 public:
  NoGradGuard() : prev_(GradMode::enabled()) { GradMode::set_enabled(false); }
  ~NoGradGuard() { GradMode::set_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

/// Re-enables tape recording inside a NoGradGuard scope.
class EnableGradGuard {
 public:
  EnableGradGuard() : prev_(GradMode::enabled()) { GradMode::set_enabled(true); }
  ~EnableGradGuard() { GradMode::set_enabled(prev_); }
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace encore
