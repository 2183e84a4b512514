// Optimizers. step() is one fused update op per device over all parameters that have a
// gradient. The learning rate and Adam's step count live in scalar tensors on the
// parameters' device, so a traced training step picks up set_lr() and the advancing bias
// correction on every replay without retracing.
#pragma once

#include <map>

#include "core/tensor.h"
#include "nn/module.h"

namespace encore::nn {

class Optimizer {
 public:
  Optimizer(std::vector<Tensor> params, double lr, const char* name);
  virtual ~Optimizer() = default;

  virtual void step() = 0;
  /// Clears gradients: to None by default (the next backward assigns fresh ones), or to
  /// zeros in place.
  void zero_grad(bool set_to_none = true);

  /// The learning rate in effect: the value of its device scalar (which a traced step may set
  /// on every replay). Reading it inside a traced function is an error, as for any value.
  double lr() const;
  void set_lr(double lr);
  const std::vector<Tensor>& params() const { return params_; }
  /// Optimizer state tensors by name ("dense.kernel.m", "step", ...), for saving/inspection.
  virtual NamedTensors state() const = 0;

 protected:
  /// Parameters with a gradient, grouped by device (one fused update per group).
  std::map<std::pair<int, int>, std::vector<size_t>> groups() const;
  /// A float64 scalar holding the learning rate on `device`.
  const Tensor& lr_tensor(Device device);

  std::vector<Tensor> params_;
  const char* name_;

 private:
  double lr_;
  std::map<std::pair<int, int>, Tensor> lr_tensors_;
};

struct SGDOptions {
  double momentum = 0.0;
  bool nesterov = false;
  double weight_decay = 0.0;
};

/// SGD with optional (Nesterov) momentum and L2 weight decay (PyTorch's formulation).
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, double lr = 0.01, SGDOptions options = {});
  void step() override;
  NamedTensors state() const override;

 private:
  SGDOptions options_;
  std::vector<Tensor> momentum_;
};

struct AdamOptions {
  double beta1 = 0.9, beta2 = 0.999;
  double epsilon = 1e-7;  // Keras' default
  double weight_decay = 0.0;
};

/// Adam (Kingma & Ba) with bias correction; PyTorch's update formula.
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, double lr = 1e-3, AdamOptions options = {});
  void step() override;
  NamedTensors state() const override;
  /// Updates done so far (reads the device step counter).
  int64_t iterations() const;

 private:
  AdamOptions options_;
  std::vector<Tensor> m_, v_;
  std::map<std::pair<int, int>, Tensor> step_;
};

}  // namespace encore::nn
