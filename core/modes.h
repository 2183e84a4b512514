// Global modes that change what a computation does. They are part of every traced
// function's cache key, so flipping one retraces instead of replaying a stale graph.
#pragma once

namespace encore {

/// Training mode: dropout is active. Thread-local; defaults to on.
bool training();
void set_training(bool on);

/// TF32 matrix math on the GPU (cuBLAS/cuDNN). Off by default: lower precision is never silent.
bool allow_tf32();
void set_allow_tf32(bool on);

class TrainingGuard {
 public:
  explicit TrainingGuard(bool on) : prev_(training()) { set_training(on); }
  ~TrainingGuard() { set_training(prev_); }
  TrainingGuard(const TrainingGuard&) = delete;
  TrainingGuard& operator=(const TrainingGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace encore
