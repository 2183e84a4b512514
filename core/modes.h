// Global modes that change what a computation does. They are part of every traced
// function's cache key, so flipping one retraces instead of replaying a stale graph.
#pragma once

#include "core/cxx20.h"

#include <memory>
#include <string>

namespace encore {

/// True while a trace records on this thread: ops are appended to a graph instead of running,
/// so tensors have shapes but no values, and reading any value (even of a tensor made before
/// the trace) is an error — the graph would bake in a number that replays do not recompute.
bool tracing();
void set_tracing(bool on);

/// Whether ops record the autograd tape. Thread-local, like the trace state.
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

/// Training mode: dropout is active. Thread-local; defaults to on.
bool training();
void set_training(bool on);

/// A mode flag owned by one object: a module's training flag (nn/module.h). A traced function
/// keeps the value of every such flag it read while tracing as a guard of its graph, as it does
/// with the requires_grad of captured tensors: a call made after the flag changed replays a
/// graph traced with the new value, or traces one, never a stale graph.
class ModeFlag : public std::enable_shared_from_this<ModeFlag> {
 public:
  explicit ModeFlag(bool on, std::string label = {}) : on_(on), label_(std::move(label)) {}
  /// The value, reported to the thread's ModeFlagObserver (a trace recording).
  bool read() const;
  /// The value, unreported: for code that does not change what a computation does with it.
  bool peek() const { return on_; }
  void set(bool on) { on_ = on; }
  /// Names the flag in explanations ("dropout_1").
  const std::string& label() const { return label_; }
  void set_label(std::string label) { label_ = std::move(label); }

 private:
  bool on_;
  std::string label_;
};

/// A count of the changes to what a computation was built from (a module's children and
/// parameters, replaced from Python). Read while a function traces, it guards the graph as a
/// ModeFlag does: a call after a change retraces.
class Generation : public std::enable_shared_from_this<Generation> {
 public:
  /// The count, reported to the thread's ModeFlagObserver.
  uint64_t read() const;
  uint64_t peek() const { return count_; }
  void bump() { ++count_; }
  const std::string& label() const { return label_; }
  void set_label(std::string label) { label_ = std::move(label); }

 private:
  uint64_t count_ = 0;
  std::string label_;
};

/// Sees every ModeFlag::read() and Generation::read() on this thread (the trace being recorded
/// installs one).
class ModeFlagObserver {
 public:
  virtual ~ModeFlagObserver() = default;
  virtual void on_flag_read(const std::shared_ptr<const ModeFlag>& flag, bool value) = 0;
  virtual void on_generation_read(const std::shared_ptr<const Generation>& generation,
                                  uint64_t count) = 0;
};
/// The observer of this thread (null when none).
ModeFlagObserver* mode_flag_observer();
void set_mode_flag_observer(ModeFlagObserver* observer);

/// TF32 matrix math on the GPU (cuBLAS/cuDNN). Off by default: lower precision is never silent.
bool allow_tf32();
void set_allow_tf32(bool on);

/// Flush subnormal floats to zero while CPU kernels run (default on, as in TensorFlow).
/// Subnormals arise e.g. in Adam's moments for parameters whose gradient is zero (dead
/// relu units) and make float math ~100x slower; values below 1.2e-38 become 0. The
/// calling thread's floating-point mode is restored after every kernel or replay.
bool flush_denormal();
void set_flush_denormal(bool on);

/// Sets or clears FTZ and DAZ on the calling thread for good: what the CPU pool's workers run
/// with (core/threads.cpp), the floating-point mode being per thread.
void set_thread_flush_denormal(bool on);

/// Applies flush_denormal() to the current thread for a scope (x86: MXCSR FTZ and DAZ).
class DenormalScope {
 public:
  DenormalScope();
  ~DenormalScope();
  DenormalScope(const DenormalScope&) = delete;
  DenormalScope& operator=(const DenormalScope&) = delete;

 private:
  unsigned saved_;
  bool changed_ = false;
};

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
