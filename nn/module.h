// Modules: layers with parameters, built lazily from the first input shape (Keras-style),
// composed with Sequential. Parameters have stable hierarchical names ("conv1d.kernel",
// "dense_1.bias") so they can be saved, loaded and compared (nn/checkpoint.h).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/modes.h"
#include "graph/lengths.h"
#include "ops/tensor.h"

namespace encore::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Module {
 public:
  virtual ~Module() = default;

  /// Keras-style layer type name ("dense", "conv1d", "lstm", ...).
  virtual std::string type_name() const = 0;

  /// Creates the parameters for inputs of `input_shape` (batch first) and returns the output
  /// shape. Called once; forward() calls it on first use.
  Shape build(const Shape& input_shape);
  bool built() const { return built_; }
  /// The output shape computed when the module was built (batch dim as given to build).
  const Shape& output_shape() const { return output_shape_; }

  Tensor forward(const Tensor& x);
  Tensor operator()(const Tensor& x) { return forward(x); }
  /// Bucketing (graph/lengths.h): the valid lengths of output `y` along the padded axis, given
  /// input `x`'s; nullopt when `y` does not carry that axis. The default knows nothing, so
  /// the layers after it do not mask and the bucket probe decides (the built-in layers' rules
  /// are in nn/lengths.cpp). May throw when the layer cannot be made exact.
  virtual std::optional<graph::Lengths> output_lengths(const graph::Lengths& in, const Tensor& x,
                                                       const Tensor& y) const;

  /// Parameters with names relative to this module ("kernel", "forward_lstm.kernel", ...).
  NamedTensors named_parameters() const;
  /// State that is not trained (Keras' non-trainable weights, e.g. BatchNormalization's
  /// moving statistics): moved and converted with the parameters and saved in checkpoints,
  /// but no gradient and no optimizer.
  NamedTensors named_buffers() const;
  /// Parameters, then buffers: what a checkpoint holds.
  NamedTensors named_weights() const;
  std::vector<Tensor> parameters() const;
  int64_t num_parameters() const;

  /// PyTorch's state_dict: every parameter and buffer by its name (named_weights), as tensors
  /// that share the module's storage but not its autograd (detached).
  NamedTensors state_dict() const;
  /// Copies `state` into the parameters and buffers in place, all or nothing. With `strict`, the
  /// names must be exactly the module's (else ValueError naming the missing and unexpected
  /// ones); without, matching names are loaded and the rest ignored. Shapes must match
  /// (ShapeError); values are converted to each tensor's dtype and device. Returns the names of
  /// the module missing from `state`, then those of `state` the module does not have.
  std::pair<std::vector<std::string>, std::vector<std::string>> load_state_dict(
      const NamedTensors& state, bool strict = true);
  /// Keras' get_weights: copies of every weight on the CPU, module by module (a module's
  /// parameters, its buffers, then its children's, in order), the order Keras layers list them.
  std::vector<Tensor> get_weights() const;
  /// Keras' set_weights: values in get_weights' order, all or nothing (count, shapes checked).
  void set_weights(const std::vector<Tensor>& values);
  /// PyTorch's zero_grad: every parameter's gradient set to None, or to zeros in place.
  void zero_grad(bool set_to_none = true);
  /// A Keras-like summary of a built module: a row per child (name, type, output shape with the
  /// batch as None, weights; a child never built that holds modules shows them instead), then
  /// total, trainable (parameters) and non-trainable (buffers) weight counts. ValueError when
  /// the module is not built.
  std::string summary() const;

  /// Sets training mode (on) or inference mode (off) for this module and every module inside
  /// it. Modules start in training mode, as in PyTorch: dropout is active in `model(x)` until
  /// `eval()`. Model::predict / evaluate always run in inference mode.
  void train(bool on = true);
  void eval() { train(false); }
  /// Whether the module computes in training mode: its own flag (train / eval) and the global
  /// mode (encore::training(); TrainingGuard(false) turns every module's off). Read inside a
  /// traced function, the flag is a guard of the graph (graph/trace.h): after train() or
  /// eval(), a call never replays a graph traced in the other mode.
  bool is_training() const;
  /// The module's own flag (train / eval), without the global mode; not a guard.
  bool training_flag() const { return training_->peek(); }
  /// This module and every module inside it, depth first.
  std::vector<Module*> modules();
  /// Direct children with their names.
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const {
    return children_;
  }

  /// Moves every parameter to `device` / converts it to `dtype`, in place (same tensors,
  /// new storage).
  void to(Device device);
  void to(DType dtype);
  /// Renames parameters under `prefix`; Sequential calls it so tensors know their full names.
  void set_name(const std::string& prefix);
  const std::string& name() const { return name_; }
  /// What messages call the module: its name in a model ("dense_1"), else its type ("dense").
  std::string label() const { return name_.empty() ? type_name() : name_; }

 protected:
  virtual Shape build_impl(const Shape& input_shape) = 0;
  virtual Tensor forward_impl(const Tensor& x) = 0;
  /// What forward() does before forward_impl: checks `x` and builds the module on first use.
  void prepare_forward(const Tensor& x);
  /// Registers a parameter (requires_grad set); one of the same name is replaced in place, and
  /// the same tensor registered under another name is renamed.
  Tensor& add_parameter(const std::string& name, Tensor value);
  /// Registers a buffer (see named_buffers).
  Tensor& add_buffer(const std::string& name, Tensor value);
  /// Registers a child module; one of the same name is replaced in place.
  void add_child(const std::string& name, std::shared_ptr<Module> child);
  /// Unregisters the parameter, buffer or child called `name`; false when there is none.
  bool remove(const std::string& name);

  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;

 private:
  NamedTensors params_, buffers_;
  std::shared_ptr<ModeFlag> training_ = std::make_shared<ModeFlag>(true);
  // Bumped when a child, parameter or buffer is set or removed; forward() reads it, so a
  // traced graph built from the old ones is not replayed.
  std::shared_ptr<Generation> structure_ = std::make_shared<Generation>();
  std::string name_;
  Shape output_shape_;
  bool built_ = false;
};

/// A stack of layers applied in order. Children are named by type with a per-model counter:
/// conv1d, dense, dense_1, ...
class Sequential : public Module {
 public:
  Sequential() = default;

  template <class L, class... Args> std::shared_ptr<L> add(Args&&... args) {
    auto layer = std::make_shared<L>(std::forward<Args>(args)...);
    add(layer);
    return layer;
  }
  void add(std::shared_ptr<Module> layer);
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& layers() const {
    return children_;
  }

  std::string type_name() const override { return "sequential"; }
  /// Builds the model for `input_shape` when it is not built, then Module::summary().
  std::string summary(const Shape& input_shape);
  using Module::summary;

 protected:
  Shape build_impl(const Shape& input_shape) override;
  Tensor forward_impl(const Tensor& x) override;
};

}  // namespace encore::nn
