// Callbacks of Model::fit: hooks at the start and end of training, of each epoch and (for
// callbacks that ask for them) of each batch. Built in: EarlyStopping, ModelCheckpoint and
// LearningRateScheduler.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "nn/schedules.h"

namespace encore {
class Tensor;
}

namespace encore::nn {

class Model;

/// Values by name: "loss" and the metrics (means over the epoch), "val_" + those for the
/// validation data, "lr" when a LearningRateScheduler runs.
using Logs = std::map<std::string, double>;

class Callback {
 public:
  virtual ~Callback() = default;
  virtual void on_train_begin(Model&) {}
  virtual void on_epoch_begin(Model&, int /*epoch*/) {}
  /// Around every training step, called only when wants_batches() is true: a fit whose
  /// callbacks need no batch hooks pays nothing per step for them.
  virtual void on_batch_begin(Model&, int64_t /*batch*/) {}
  virtual void on_batch_end(Model&, int64_t /*batch*/) {}
  /// `logs` holds the epoch's values; a callback may add entries.
  virtual void on_epoch_end(Model&, int /*epoch*/, Logs& /*logs*/) {}
  virtual void on_train_end(Model&) {}
  virtual bool wants_batches() const { return false; }
};

/// "min", "max", or "auto": max for a monitored name with "acc" in it, else min (Keras' rule).
bool higher_is_better(const std::string& monitor, const std::string& mode);

struct EarlyStoppingOptions {
  std::string monitor = "val_loss";
  /// Smaller improvements count as none.
  double min_delta = 0.0;
  /// Epochs without improvement before training stops.
  int patience = 0;
  std::string mode = "auto";
  /// When training stops, put back the parameters of the best epoch.
  bool restore_best_weights = false;
};

/// Stops fit when the monitored value has not improved for `patience` epochs.
class EarlyStopping : public Callback {
 public:
  explicit EarlyStopping(EarlyStoppingOptions options = {});
  void on_train_begin(Model& model) override;
  void on_epoch_end(Model& model, int epoch, Logs& logs) override;
  /// The epoch fit stopped after (-1 while it has not stopped), and the best value seen.
  int stopped_epoch() const { return stopped_epoch_; }
  double best() const { return best_; }

 private:
  EarlyStoppingOptions options_;
  bool higher_;
  double best_ = 0;
  int wait_ = 0, stopped_epoch_ = -1;
  std::vector<Tensor> best_weights_;
};

struct ModelCheckpointOptions {
  /// "{epoch}" in the path becomes the epoch number (1-based, as Keras prints it).
  std::string path;
  std::string monitor = "val_loss";
  /// Save only when the monitored value improved on the best so far.
  bool save_best_only = false;
  std::string mode = "auto";
  /// Parameters only (nn::save), instead of everything needed to resume (Model::save_checkpoint).
  bool weights_only = false;
};

/// Saves a checkpoint at the end of every epoch (or of improving ones), atomically.
class ModelCheckpoint : public Callback {
 public:
  explicit ModelCheckpoint(ModelCheckpointOptions options);
  void on_epoch_end(Model& model, int epoch, Logs& logs) override;
  /// The path written last (empty before the first save).
  const std::string& last_saved() const { return last_; }

 private:
  ModelCheckpointOptions options_;
  bool higher_;
  bool has_best_ = false;
  double best_ = 0;
  std::string last_;
};

/// Sets the optimizer's learning rate from a schedule before every training step (the step
/// number is Model::iterations(), updates done so far), or per epoch (the epoch number), and adds
/// the rate to the epoch's logs as "lr". The rate is set outside the traced step, which reads it
/// from its device scalar: no retrace.
class LearningRateScheduler : public Callback {
 public:
  explicit LearningRateScheduler(Schedule schedule, bool per_epoch = false);
  void on_train_begin(Model&) override { set_ = false; }
  void on_epoch_begin(Model& model, int epoch) override;
  void on_batch_begin(Model& model, int64_t batch) override;
  void on_epoch_end(Model& model, int epoch, Logs& logs) override;
  bool wants_batches() const override { return true; }

 private:
  Schedule schedule_;
  bool per_epoch_;
  int epoch_ = 0;
  double last_ = 0;
  bool set_ = false;
};

}  // namespace encore::nn
