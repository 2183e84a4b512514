// Optimizers. step() is one fused update op per device over all parameters that have a
// gradient. The learning rate and Adam's step count live in scalar tensors on the
// parameters' device, so a traced training step picks up set_lr() and the advancing bias
// correction on every replay without retracing. A learning-rate schedule (nn/schedules.h) is
// applied by calling set_lr before each step, outside the traced function.
#pragma once

#include <functional>
#include <map>
#include <memory>

#include "nn/module.h"
#include "ops/tensor.h"

namespace encore::nn {

class Optimizer {
 public:
  Optimizer(std::vector<Tensor> params, double lr, const char* name);
  virtual ~Optimizer() = default;

  virtual void step() = 0;
  /// The optimizer's kind: "sgd", "adam", "adamw", "rmsprop".
  const char* kind() const { return name_; }
  /// Clears gradients: to None by default (the next backward assigns fresh ones), or to
  /// zeros in place.
  void zero_grad(bool set_to_none = true);

  /// The learning rate in effect: the value of its device scalar (which a traced step may set
  /// on every replay). Reading it inside a traced function is an error, as for any value.
  double lr() const;
  /// Sets the rate (>= 0; a new optimizer needs one > 0).
  void set_lr(double lr);
  const std::vector<Tensor>& params() const { return params_; }

  /// Gradient clipping done by step() before the update, with ops (so inside a traced step too):
  /// by global norm (every gradient scaled by min(1, global_norm / (norm + 1e-6)), where norm is
  /// that of all gradients together, as PyTorch's clip_grad_norm_ and Keras' global_clipnorm), or
  /// by value (each element clipped to [-value, value], Keras' clipvalue). 0 turns one off; at
  /// most one of the two.
  struct Clipping {
    double global_norm = 0.0;
    double value = 0.0;
  };
  void set_clipping(Clipping clipping);
  const Clipping& clipping() const { return clipping_; }

  /// Every state tensor by name: per-parameter slots once a step created them
  /// ("dense.kernel.m"; "#3.m" for an unnamed parameter 3), "lr" (a float64 scalar holding the
  /// learning rate) and, for Adam, "step" (updates done, int64).
  NamedTensors state() const;
  /// Restores a state() of an optimizer of the same kind over parameters of the same names,
  /// shapes and dtypes, all or nothing: a tensor it does not expect, or of another shape or dtype,
  /// or a missing "lr" / "step", is an error that leaves the optimizer untouched. Slots missing
  /// from `state` (never created there) are dropped here. Existing state tensors are written in
  /// place, so traced steps that captured them keep replaying.
  void load_state(const NamedTensors& state);
  /// Converts state tensors to their parameters' dtypes in place (same tensors, new storage), as
  /// the step after Module::to(dtype) needs (Model does it before its steps and checkpoints).
  /// Not inside a traced function: the tensors get new storage.
  void match_param_dtypes();
  /// Throws a DTypeError, as `op`, when a state tensor's dtype is not its parameter's (the
  /// parameters were converted after a step made the state, and match_param_dtypes was not called).
  void check_param_dtypes(const char* op) const;

  /// Makes step() update the parameters in parts (indices into params(), each in one part), in
  /// the order given, calling `before(k)` just before the update of part k: a data-parallel
  /// optimizer waits there for bucket k's all-reduce alone (dist::DistributedOptimizer, which
  /// owns the hook through `owner`). Results are those of one update per device: the update ops
  /// are elementwise. With clipping, every part's hook runs before the gradients are clipped.
  /// `after` runs when the step's last update is queued (the buckets start over).
  void set_update_parts(std::vector<std::vector<size_t>> parts, std::function<void(size_t)> before,
                        std::function<void()> after, std::shared_ptr<void> owner);
  /// Whether set_update_parts made this optimizer data-parallel.
  bool distributed() const { return parts_.owner != nullptr; }

 protected:
  // What state() and load_state() see: per-parameter slot tensors by slot name (undefined until
  // a step creates them), and the per-device step counters of an optimizer that has them.
  struct StateRefs {
    std::vector<std::pair<const char*, std::vector<Tensor>*>> per_param;
    std::map<std::pair<int, int>, Tensor>* steps = nullptr;
  };
  virtual StateRefs state_refs() = 0;
  /// Applies clipping() to the gradients; every step() starts with it.
  void clip_gradients();
  /// Parameter i's tensor of a slot, created as zeros ("<param>.<slot>") on first use.
  Tensor& slot(std::vector<Tensor>& slots, size_t i, const char* slot_name);

  /// One fused update: parameters with a gradient on one device, in one update part.
  struct Group {
    std::pair<int, int> device;
    std::vector<size_t> idx;
    size_t part = 0;
    bool first_on_device = true;  // per-device state (Adam's step count) advances here
  };
  /// The updates of a step in order: by update part (set_update_parts; one part by default),
  /// then by device. Each step() calls enter(group) before the group's update.
  std::vector<Group> groups() const;
  void enter(const Group& g);
  /// Every step() ends with it.
  void finish_step();
  /// A float64 scalar holding the learning rate on `device`.
  const Tensor& lr_tensor(Device device);

  std::vector<Tensor> params_;
  const char* name_;

 private:
  std::string param_key(size_t i) const;

  double lr_;
  std::map<std::pair<int, int>, Tensor> lr_tensors_;
  Clipping clipping_;
  struct UpdateParts {
    std::vector<std::vector<size_t>> parts;
    std::function<void(size_t)> before;
    std::function<void()> after;
    std::shared_ptr<void> owner;
  } parts_;
};

/// Throws a ValueError, as `op`, naming the parameters of `module` that require grad but that
/// `optimizer` does not hold: training would never change them.
void check_covers(const Optimizer& optimizer, const Module& module, const char* op);

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

 protected:
  StateRefs state_refs() override;

 private:
  SGDOptions options_;
  std::vector<Tensor> momentum_;
};

struct AdamOptions {
  double beta1 = 0.9, beta2 = 0.999;
  double epsilon = 1e-7;  // Keras' default
  /// L2 weight decay added to the gradient (Adam), or decoupled (AdamW).
  double weight_decay = 0.0;
  /// Where epsilon goes. false (default): PyTorch's placement, w -= lr_t * m / (sqrt(v_hat) + eps).
  /// true: Keras / TensorFlow's "epsilon hat", w -= lr_t * m / ((sqrt(v) + eps) / sqrt(1 -
  /// beta2^t)), which is what Keras computes for the same epsilon. The two agree for gradients much
  /// larger than epsilon; for gradients ~1e-6 they differ about 3x in the first steps.
  bool epsilon_hat = false;
};

/// Adam (Kingma & Ba) with bias correction; PyTorch's update formula (see epsilon_hat for
/// Keras').
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, double lr = 1e-3, AdamOptions options = {});
  void step() override;
  /// Updates done so far (reads the device step counter).
  int64_t iterations() const;

 protected:
  Adam(std::vector<Tensor> params, double lr, AdamOptions options, const char* name,
       bool decoupled);
  StateRefs state_refs() override;

 private:
  AdamOptions options_;
  bool decoupled_ = false;
  std::vector<Tensor> m_, v_;
  std::map<std::pair<int, int>, Tensor> step_;
};

/// AdamW (Loshchilov & Hutter): Adam with decoupled weight decay, w *= 1 - lr * weight_decay
/// before each update (PyTorch's and Keras' formulation; default weight_decay 0.01 as PyTorch).
class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, double lr = 1e-3, AdamOptions options = {.weight_decay = 0.01});
};

struct RMSpropOptions {
  double rho = 0.9;
  double momentum = 0.0;
  double epsilon = 1e-7;
  /// Divide by the estimated variance of the gradient instead of its second moment.
  bool centered = false;
};

/// RMSprop as in Keras: v = rho v + (1 - rho) g^2; w -= lr g / sqrt(v + eps) (centered:
/// v - mean(g)^2 under the root; with momentum the increments accumulate in a buffer).
class RMSprop : public Optimizer {
 public:
  RMSprop(std::vector<Tensor> params, double lr = 1e-3, RMSpropOptions options = {});
  void step() override;

 protected:
  StateRefs state_refs() override;

 private:
  RMSpropOptions options_;
  std::vector<Tensor> v_, momentum_, mean_grad_;
};

}  // namespace encore::nn
