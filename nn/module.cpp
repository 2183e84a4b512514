#include "nn/module.h"

#include <algorithm>
#include <array>
#include <set>

#include "core/modes.h"

#include "ops/ops.h"
#include "ops/optim.h"

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
  const bool removed = std::erase_if(params_, named) + std::erase_if(buffers_, named) +
                           std::erase_if(children_, named) >
                       0;
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

NamedTensors Module::state_dict() const {
  NamedTensors out;
  for (auto& [name, t] : named_weights()) out.emplace_back(name, t.detach());
  return out;
}

namespace {

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "'" : ", '") + n + "'";
  return s.empty() ? "none" : s;
}

// Writes `values[i]` into `targets[i]` in place (same storage: traced steps keep replaying),
// converted to its dtype and device, once every shape has been checked.
void assign(const std::vector<std::pair<std::string, Tensor>>& targets,
            const std::vector<Tensor>& values, const char* op) {
  for (size_t i = 0; i < targets.size(); ++i) {
    const Tensor& t = targets[i].second;
    const Tensor& v = values[i];
    ENCORE_CHECK(v.defined(), ValueError, "[", op, "] the value for '", targets[i].first,
                 "' is undefined");
    ENCORE_CHECK(v.shape() == t.shape(), ShapeError, "[", op, "] '", targets[i].first,
                 "' has shape ", t.shape().str(), " but the value ", describe(v), " does not");
  }
  NoGradGuard no_grad;
  for (size_t i = 0; i < targets.size(); ++i) {
    Tensor t = targets[i].second.detach();
    t.copy_(values[i].to(t.dtype()).to(t.device()));
  }
}

}  // namespace

std::pair<std::vector<std::string>, std::vector<std::string>> Module::load_state_dict(
    const NamedTensors& state, bool strict) {
  const NamedTensors own = named_weights();
  std::set<std::string> given;
  for (const auto& [name, t] : state)
    ENCORE_CHECK(given.insert(name).second, ValueError, "[load_state_dict] '", name,
                 "' is given twice");
  std::vector<std::string> missing, unexpected;
  std::set<std::string> known;
  NamedTensors targets;
  std::vector<Tensor> values;
  for (const auto& [name, t] : own) {
    known.insert(name);
    const auto it =
        std::find_if(state.begin(), state.end(), [&](const auto& e) { return e.first == name; });
    if (it == state.end()) {
      missing.push_back(name);
      continue;
    }
    targets.emplace_back(name, t);
    values.push_back(it->second);
  }
  for (const auto& [name, t] : state)
    if (!known.count(name)) unexpected.push_back(name);
  ENCORE_CHECK(!strict || (missing.empty() && unexpected.empty()), ValueError,
               "[load_state_dict] the state of ", label(), " does not match: missing ",
               joined(missing), "; unexpected ", joined(unexpected),
               " (strict=False loads the names that match)");
  assign(targets, values, "load_state_dict");
  return {missing, unexpected};
}

namespace {

// Keras' order: a module's own parameters and buffers, then its children's.
void keras_order(const Module& m, const std::string& prefix, NamedTensors& out) {
  NamedTensors own = m.named_weights();
  std::set<std::string> in_children;
  for (const auto& [name, child] : m.children())
    for (const auto& [n, t] : child->named_weights()) in_children.insert(name + "." + n);
  for (auto& [n, t] : own)
    if (!in_children.count(n)) out.emplace_back(prefix + n, t);
  for (const auto& [name, child] : m.children()) keras_order(*child, prefix + name + ".", out);
}

}  // namespace

std::vector<Tensor> Module::get_weights() const {
  NamedTensors ordered;
  keras_order(*this, "", ordered);
  std::vector<Tensor> out;
  for (const auto& [n, t] : ordered) out.push_back(t.detach().to(Device::cpu()).clone());
  return out;
}

void Module::set_weights(const std::vector<Tensor>& values) {
  NamedTensors ordered;
  keras_order(*this, "", ordered);
  ENCORE_CHECK(values.size() == ordered.size(), ValueError, "[set_weights] ", label(), " has ",
               ordered.size(), " weights, got ", values.size(), " values");
  assign(ordered, values, "set_weights");
}

void Module::zero_grad(bool set_to_none) {
  std::vector<Tensor> params = parameters();
  zero_grads(params, set_to_none);
}

namespace {

int64_t count(const NamedTensors& tensors) {
  int64_t n = 0;
  for (const auto& [name, t] : tensors) n += t.numel();
  return n;
}

// 1234567 -> "1,234,567"
std::string grouped(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// "(None, 35, 128)": the batch is whatever a call brings, as Keras shows it.
std::string output_shape_of(const Module& m) {
  if (!m.built()) return "?";
  const Shape& s = m.output_shape();
  std::string out = "(";
  for (int i = 0; i < s.size(); ++i)
    out += (i ? ", " : "") + (i == 0 ? std::string("None") : std::to_string(s[i]));
  return out + (s.size() == 1 ? ",)" : ")");
}

void summary_rows(const Module& m, const std::string& prefix,
                  std::vector<std::array<std::string, 3>>& rows) {
  for (const auto& [name, child] : m.children()) {
    if (!child->built() && !child->children().empty()) {
      summary_rows(*child, prefix + name + ".", rows);
      continue;
    }
    rows.push_back({prefix + name + " (" + child->type_name() + ")", output_shape_of(*child),
                    grouped(count(child->named_weights()))});
  }
}

}  // namespace

std::string Module::summary() const {
  ENCORE_CHECK(built_, ValueError, "[", label(),
               "] summary needs a built model: call it on a batch, or build(",
               "input_shape) first");
  std::vector<std::array<std::string, 3>> rows;
  summary_rows(*this, "", rows);
  std::array<size_t, 3> width{std::string("Layer (type)").size(),
                              std::string("Output Shape").size(), std::string("Param #").size()};
  for (const auto& r : rows)
    for (size_t i = 0; i < 3; ++i) width[i] = std::max(width[i], r[i].size());
  auto line = [&](const std::array<std::string, 3>& r) {
    std::string s = r[0] + std::string(width[0] + 3 - r[0].size(), ' ') + r[1] +
                    std::string(width[1] + 3 - r[1].size(), ' ');
    return s + std::string(width[2] - r[2].size(), ' ') + r[2] + "\n";
  };
  const std::string rule(width[0] + width[1] + width[2] + 6, '=');
  std::string s = "Model: \"" + label() + "\"\n" +
                  line({"Layer (type)", "Output Shape", "Param #"}) + rule + "\n";
  for (const auto& r : rows) s += line(r);
  const int64_t trainable = count(named_parameters()), fixed = count(named_buffers());
  return s + rule + "\nTotal params: " + grouped(trainable + fixed) +
         "\nTrainable params: " + grouped(trainable) + "\nNon-trainable params: " + grouped(fixed) +
         "\n";
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
  return summary();
}

}  // namespace encore::nn
