#include "nn/module.h"

#include <cstdio>

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
  return forward_impl(x);
}

Tensor& Module::add_parameter(const std::string& name, Tensor value) {
  value.set_requires_grad(true);
  params_.emplace_back(name, std::move(value));
  return params_.back().second;
}

Tensor& Module::add_buffer(const std::string& name, Tensor value) {
  buffers_.emplace_back(name, std::move(value));
  return buffers_.back().second;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> child) {
  children_.emplace_back(name, std::move(child));
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
