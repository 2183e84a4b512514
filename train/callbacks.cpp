#include "train/callbacks.h"

#include <cmath>

#include "core/modes.h"
#include "nn/checkpoint.h"
#include "train/model.h"

namespace encore::nn {

namespace {

double monitored(const Logs& logs, const std::string& monitor, const char* who) {
  const auto it = logs.find(monitor);
  if (it != logs.end()) return it->second;
  std::string known;
  for (const auto& [k, v] : logs) known += (known.empty() ? "" : ", ") + k;
  throw ValueError(detail::cat(
      "[", who, "] monitors '", monitor, "', which fit does not log (it logs ", known,
      monitor.starts_with("val_") ? "; validation values need validation data" : "", ")"));
}

bool improves(double value, double best, double min_delta, bool higher) {
  return higher ? value - min_delta > best : value + min_delta < best;
}

}  // namespace

bool higher_is_better(const std::string& monitor, const std::string& mode) {
  if (mode == "max") return true;
  if (mode == "min") return false;
  ENCORE_CHECK(mode == "auto", ValueError, "[callback] mode must be 'auto', 'min' or 'max', got '",
               mode, "'");
  return monitor.find("acc") != std::string::npos;
}

EarlyStopping::EarlyStopping(EarlyStoppingOptions options)
    : options_(std::move(options)), higher_(higher_is_better(options_.monitor, options_.mode)) {
  ENCORE_CHECK(options_.patience >= 0 && options_.min_delta >= 0, ValueError,
               "[early_stopping] patience and min_delta must be >= 0");
}

void EarlyStopping::on_train_begin(Model&) {
  best_ = higher_ ? -INFINITY : INFINITY;
  wait_ = 0;
  stopped_epoch_ = -1;
  best_weights_.clear();
}

void EarlyStopping::on_epoch_end(Model& model, int epoch, Logs& logs) {
  const double value = monitored(logs, options_.monitor, "early_stopping");
  if (improves(value, best_, options_.min_delta, higher_)) {
    best_ = value;
    wait_ = 0;
    if (options_.restore_best_weights) {
      best_weights_.clear();
      for (const Tensor& p : model.module().parameters())
        best_weights_.push_back(p.detach().clone());
    }
    return;
  }
  if (++wait_ <= options_.patience) return;
  stopped_epoch_ = epoch;
  model.stop_training = true;
  if (options_.restore_best_weights && !best_weights_.empty()) {
    // In place: traced steps that captured the parameters keep replaying.
    NoGradGuard no_grad;
    const std::vector<Tensor> params = model.module().parameters();
    for (size_t i = 0; i < params.size(); ++i) Tensor(params[i]).copy_(best_weights_[i]);
  }
}

ModelCheckpoint::ModelCheckpoint(ModelCheckpointOptions options)
    : options_(std::move(options)), higher_(higher_is_better(options_.monitor, options_.mode)) {
  ENCORE_CHECK(!options_.path.empty(), ValueError, "[model_checkpoint] needs a path");
  check_path(options_.path, "model_checkpoint");
}

void ModelCheckpoint::on_epoch_end(Model& model, int epoch, Logs& logs) {
  if (options_.save_best_only) {
    const double value = monitored(logs, options_.monitor, "model_checkpoint");
    if (has_best_ && !improves(value, best_, 0.0, higher_)) return;
    has_best_ = true;
    best_ = value;
  }
  std::string path = options_.path;
  for (size_t at; (at = path.find("{epoch}")) != std::string::npos;)
    path.replace(at, 7, std::to_string(epoch + 1));
  if (options_.weights_only)
    save(model.module(), path);
  else
    model.save_checkpoint(path);
  last_ = path;
}

LearningRateScheduler::LearningRateScheduler(Schedule schedule, bool per_epoch)
    : schedule_(std::move(schedule)), per_epoch_(per_epoch) {}

void LearningRateScheduler::on_epoch_begin(Model&, int epoch) { epoch_ = epoch; }

// Before each step (fit makes a named optimizer before the first step's hooks); the device
// scalar is written only when the rate changes.
void LearningRateScheduler::on_batch_begin(Model& model, int64_t) {
  const double lr = schedule_(per_epoch_ ? epoch_ : model.iterations());
  if (lr == last_ && set_) return;
  model.optimizer()->set_lr(lr);
  last_ = lr;
  set_ = true;
}

void LearningRateScheduler::on_epoch_end(Model&, int, Logs& logs) { logs["lr"] = last_; }

}  // namespace encore::nn
