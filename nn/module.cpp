#include "nn/module.h"

#include <cstdio>

#include "core/modes.h"

#include "ops/ops.h"

namespace encore::nn {

Shape Module::build(const Shape& input_shape) {
  ENCORE_CHECK(!built_, ValueError, "[", type_name(), "] is already built");
  output_shape_ = build_impl(input_shape);
  built_ = true;
  set_name(name_);
  return output_shape_;
}

void Module::prepare_forward(const Tensor& x) {
  ENCORE_CHECK(x.defined(), ValueError, "[", type_name(), "] input is undefined");
  if (!built_) {
    build(x.shape());
    to(x.device());
  }
}

Tensor Module::forward(const Tensor& x) {
  prepare_forward(x);
  if (structure_->label().empty()) structure_->set_label(label());
  structure_->read();
  Tensor y = forward_impl(x);
  if (const auto in = graph::lengths_of(x); in && !graph::lengths_of(y))
    if (auto out = output_lengths(*in, x, y)) graph::set_lengths(y, std::move(*out));
  return y;
}

Tensor& Module::add_parameter(const std::string& name, Tensor value) {
  value.set_requires_grad(true);
  structure_->bump();
  std::erase_if(params_, [&](const auto& p) { return p.second.same(value) && p.first != name; });
  for (auto& [n, t] : params_)
    if (n == name) return t = std::move(value);
  params_.emplace_back(name, std::move(value));
  return params_.back().second;
}

Tensor& Module::add_buffer(const std::string& name, Tensor value) {
  structure_->bump();
  buffers_.emplace_back(name, std::move(value));
  return buffers_.back().second;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> child) {
  structure_->bump();
  for (auto& [n, c] : children_)
    if (n == name) {
      c = std::move(child);
      return;
    }
  children_.emplace_back(name, std::move(child));
}

bool Module::remove(const std::string& name) {
  const auto named = [&](const auto& entry) { return entry.first == name; };
  const bool removed = std::erase_if(params_, named) + std::erase_if(buffers_, named) + std::erase_if(children_, named) > 0;
  if (removed) structure_->bump();
  return removed;
}

void Module::train(bool on) {
  for (Module* m : modules()) m->training_->set(on);
}

bool Module::is_training() const {
  if (training_->label().empty()) training_->set_label(label());
  // The global mode first: when it is off the flag does not matter, and is no guard.
  return training() && training_->read();
}

std::vector<Module*> Module::modules() {
  std::vector<Module*> out{this};
  for (auto& [n, child] : children_)
    for (Module* m : child->modules()) out.push_back(m);
  return out;
}

NamedTensors Module::named_parameters() const {
  NamedTensors out = params_;
  for (const auto& [name, child] : children_)
    for (auto& [n, t] : child->named_parameters()) out.emplace_back(name + "." + n, t);
  return out;
}

NamedTensors Module::named_buffers() const {
  NamedTensors out = buffers_;
  for (const auto& [name, child] : children_)
    for (auto& [n, t] : child->named_buffers()) out.emplace_back(name + "." + n, t);
  return out;
}

NamedTensors Module::named_weights() const {
  NamedTensors out = named_parameters();
  for (auto& named : named_buffers()) out.push_back(std::move(named));
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters()) out.push_back(t);
  return out;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (auto& [name, t] : named_parameters()) n += t.numel();
  return n;
}

void Module::to(Device device) {
  for (auto& [n, t] : named_weights())
    if (t.device() != device) t.set_data(t.detach().to(device));
}

void Module::to(DType dtype) {
  for (auto& [n, t] : named_weights())
    if (t.dtype() != dtype) t.set_data(t.detach().to(dtype));
}

void Module::set_name(const std::string& prefix) {
  name_ = prefix;
  training_->set_label(label());
  structure_->set_label(label());
  const std::string p = prefix.empty() ? "" : prefix + ".";
  for (auto& [n, t] : params_) t.set_name(p + n);
  for (auto& [n, t] : buffers_) t.set_name(p + n);
  for (auto& [n, child] : children_) child->set_name(p + n);
}

void Sequential::add(std::shared_ptr<Module> layer) {
  ENCORE_CHECK(layer, ValueError, "[sequential] cannot add a null layer");
  ENCORE_CHECK(!built(), ValueError, "[sequential] cannot add layers after the model is built");
  const std::string base = layer->type_name();
  int count = 0;
  for (const auto& [n, c] : children_) count += c->type_name() == base;
  const std::string name = count == 0 ? base : base + "_" + std::to_string(count);
  layer->set_name(name);
  add_child(name, std::move(layer));
}

Shape Sequential::build_impl(const Shape& input_shape) {
  ENCORE_CHECK(!children_.empty(), ValueError, "[sequential] has no layers");
  Shape s = input_shape;
  for (auto& [n, layer] : children_) s = layer->built() ? s : layer->build(s);
  return s;
}

Tensor Sequential::forward_impl(const Tensor& x) {
  Tensor h = x;
  for (auto& [n, layer] : children_) h = layer->forward(h);
  return h;
}

std::string Sequential::summary(const Shape& input_shape) {
  if (!built()) build(input_shape);
  std::string s;
  char line[160];
  std::snprintf(line, sizeof line, "%-34s %-20s %10s\n", "layer", "output shape", "params");
  s += line;
  for (auto& [n, layer] : children_) {
    std::snprintf(line, sizeof line, "%-34s %-20s %10lld\n", (n + " (" + layer->type_name() + ")").c_str(),
                  layer->output_shape().str().c_str(), static_cast<long long>(layer->num_parameters()));
    s += line;
  }
  std::snprintf(line, sizeof line, "total parameters: %lld\n", static_cast<long long>(num_parameters()));
  return s + line;
}

}  // namespace encore::nn
