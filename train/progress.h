// The progress bar of Model::fit / evaluate / predict, Keras-style:
//
//   Epoch 2/10
//    12/32 [=========>....................] 0.4s, ETA 0.6s - loss: 0.6931 - accuracy: 0.5123
//    32/32 [==============================] 1.0s, 31.2ms/step - loss: 0.6812 - val_loss: 0.6777
//
// verbose 1: a bar, redrawn in place at most every 0.1 s on a terminal ("interactive"), and only
// its final line per epoch otherwise; verbose 2: one line per epoch; 0: nothing. Running values
// are read (a device sync) only when the bar is drawn.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "train/callbacks.h"

namespace encore::nn {

/// "850us", "12.3ms", "4.2s", "3m05s".
std::string format_duration(double seconds);

class ProgressBar {
 public:
  /// `write` receives the text (default: stdout, flushed); `interactive` allows redrawing in
  /// place ('\r').
  ProgressBar(int verbose, std::function<void(const std::string&)> write, bool interactive);

  /// Starts a pass of `total` steps (-1: unknown); `title` ("Epoch 2/10") gets a line of its own.
  /// Values are shown in the order of `names`, then the others.
  void start(int64_t total, const std::string& title, std::vector<std::string> names);
  /// `done` steps are done; `logs` gives the running values (called only when drawing).
  void update(int64_t done, const std::function<Logs()>& logs);
  /// The pass is over: its final line with `logs`.
  void finish(int64_t done, const Logs& logs);

  /// Whether standard output is a terminal.
  static bool stdout_is_terminal();

 private:
  std::string line(int64_t done, const Logs& logs, bool final) const;
  double elapsed() const;

  int verbose_;
  std::function<void(const std::string&)> write_;
  bool interactive_;
  int64_t total_ = -1;
  std::chrono::steady_clock::time_point start_, drawn_;
  std::string title_;
  std::vector<std::string> names_;
};

}  // namespace encore::nn
