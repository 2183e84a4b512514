#include "nn/optim.h"

#include <cmath>
#include <set>
#include <unordered_map>

#include "core/modes.h"
#include "ops/ops.h"
#include "ops/optim.h"

namespace encore::nn {

namespace {
std::pair<int, int> key(Device d) { return {static_cast<int>(d.type), d.index}; }
}  // namespace

Optimizer::Optimizer(std::vector<Tensor> params, double lr, const char* name)
    : params_(std::move(params)), name_(name), lr_(lr) {
  ENCORE_CHECK(!params_.empty(), ValueError, "[", name,
               "] got no parameters: build the model first ",
               "(model.build(input_shape)) and pass model.parameters()");
  ENCORE_CHECK(std::isfinite(lr) && lr > 0, ValueError, "[", name,
               "] learning rate must be finite and > 0, got ", lr);
  std::unordered_map<const TensorImpl*, size_t> position;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    ENCORE_CHECK(p.defined() && p.requires_grad() && p.is_leaf(), ValueError, "[", name,
                 "] parameters must be leaf tensors that require grad, got ", describe(p));
    // Listed twice, a parameter would be updated twice per step.
    const auto [it, first] = position.emplace(p.impl(), i);
    ENCORE_CHECK(first, ValueError, "[", name, "] parameter ",
                 p.name().empty() ? describe(p) : "'" + p.name() + "'",
                 " is listed twice (positions ", it->second, " and ", i, ")");
  }
}

void Optimizer::zero_grad(bool set_to_none) { zero_grads(params_, set_to_none); }

double Optimizer::lr() const {
  if (lr_tensors_.empty()) return lr_;
  return lr_tensors_.begin()->second.item();
}

void Optimizer::set_lr(double lr) {
  // 0 is a rate schedules reach (the start of a warm-up, the end of a cosine decay).
  ENCORE_CHECK(std::isfinite(lr) && lr >= 0, ValueError, "[", name_,
               "] learning rate must be finite and >= 0, got ", lr);
  // Every device the parameters live on gets its scalar now, so the write is a graph node when
  // set_lr runs inside a traced function and every replay repeats it.
  for (const Tensor& p : params_) lr_tensor(p.device());
  lr_ = lr;
  NoGradGuard no_grad;
  for (auto& [k, t] : lr_tensors_) t.fill_(lr);
}

const Tensor& Optimizer::lr_tensor(Device device) {
  Tensor& t = lr_tensors_[key(device)];
  if (!t.defined()) {
    t = full({}, lr_, DType::Float64, device);
    t.set_name(std::string(name_) + ".lr");
  }
  return t;
}

void Optimizer::set_clipping(Clipping c) {
  ENCORE_CHECK(c.global_norm >= 0 && c.value >= 0, ValueError, "[", name_,
               "] clipping needs global_norm >= 0 and value >= 0, got ", c.global_norm, " and ",
               c.value);
  ENCORE_CHECK(c.global_norm == 0 || c.value == 0, ValueError, "[", name_,
               "] clip by global norm or by value, not both");
  clipping_ = c;
}

void Optimizer::clip_gradients() {
  if (clipping_.global_norm == 0 && clipping_.value == 0) return;
  // Clipping reads every gradient: all parts must be final (reduced) first.
  if (parts_.before)
    for (size_t k = 0; k < parts_.parts.size(); ++k) parts_.before(k);
  NoGradGuard no_grad;
  std::vector<Tensor> grads;
  for (const Tensor& p : params_)
    if (Tensor g = p.grad(); g.defined()) grads.push_back(g);
  if (grads.empty()) return;
  if (clipping_.value > 0) {
    for (Tensor& g : grads) g.copy_(clip(g, -clipping_.value, clipping_.value));
    return;
  }
  // The squared norm in float64 on the first gradient's device, whatever the dtypes.
  const Device device = grads[0].device();
  Tensor total;
  for (const Tensor& g : grads) {
    const Tensor sq = sum(g * g).to(DType::Float64).to(device);
    total = total.defined() ? total + sq : sq;
  }
  const Tensor scale = clip(clipping_.global_norm / (sqrt(total) + 1e-6), 0.0, 1.0);
  for (Tensor& g : grads) g.copy_(g * scale.to(g.dtype()).to(g.device()));
}

Tensor& Optimizer::slot(std::vector<Tensor>& slots, size_t i, const char* slot_name) {
  Tensor& t = slots[i];
  if (!t.defined()) {
    t = zeros_like(params_[i]);
    t.set_name(param_key(i) + "." + slot_name);
  }
  return t;
}

std::string Optimizer::param_key(size_t i) const {
  const std::string& n = params_[i].name();
  return n.empty() ? detail::cat("#", i) : n;
}

NamedTensors Optimizer::state() const {
  StateRefs refs = const_cast<Optimizer*>(this)->state_refs();
  NamedTensors s;
  for (size_t i = 0; i < params_.size(); ++i)
    for (const auto& [slot_name, tensors] : refs.per_param)
      if ((*tensors)[i].defined()) s.emplace_back(param_key(i) + "." + slot_name, (*tensors)[i]);
  s.emplace_back("lr", full({}, lr(), DType::Float64));
  if (refs.steps)
    s.emplace_back("step",
                   refs.steps->empty() ? zeros({}, DType::Int64) : refs.steps->begin()->second);
  return s;
}

void Optimizer::load_state(const NamedTensors& state) {
  StateRefs refs = state_refs();
  std::map<std::string, std::pair<std::vector<Tensor>*, size_t>> expected;
  std::set<std::string> keys;
  for (size_t i = 0; i < params_.size(); ++i) {
    ENCORE_CHECK(keys.insert(param_key(i)).second, ValueError, "[", name_,
                 "] two parameters are named '", param_key(i),
                 "': their state cannot be told apart");
    for (const auto& [slot_name, tensors] : refs.per_param)
      expected[param_key(i) + "." + slot_name] = {tensors, i};
  }
  std::map<std::string, const Tensor*> given;
  for (const auto& [name, t] : state) {
    ENCORE_CHECK(given.emplace(name, &t).second, ValueError, "[", name_, "] state '", name,
                 "' is given twice");
    if (name == "lr" || (name == "step" && refs.steps)) {
      const DType want = name == "lr" ? DType::Float64 : DType::Int64;
      ENCORE_CHECK(t.numel() == 1 && t.dtype() == want, ValueError, "[", name_, "] state '", name,
                   "' must be a ", encore::name(want), " scalar, got ", describe(t));
      continue;
    }
    const auto it = expected.find(name);
    ENCORE_CHECK(
        it != expected.end(), ValueError, "[", name_, "] state '", name,
        "' is not state of this optimizer (its parameters and kind must match the ones saved)");
    const Tensor& p = params_[it->second.second];
    ENCORE_CHECK(t.shape() == p.shape(), ShapeError, "[", name_, "] state '", name, "' is ",
                 t.shape().str(), " but the parameter is ", p.shape().str());
    ENCORE_CHECK(t.dtype() == p.dtype(), ValueError, "[", name_, "] state '", name, "' is ",
                 encore::name(t.dtype()), " but the parameter is ", encore::name(p.dtype()));
    // A second moment below 0 or a value not finite would turn the next step's weights to NaN.
    const bool moment = name.ends_with(".v");
    for (const double e : t.to_vector<double>())
      ENCORE_CHECK(std::isfinite(e) && (!moment || e >= 0), ValueError, "[", name_, "] state '",
                   name, "' holds ", e,
                   moment ? ": a second moment must be finite and >= 0" : ": state must be finite");
  }
  ENCORE_CHECK(given.count("lr"), ValueError, "[", name_, "] the state has no 'lr'");
  ENCORE_CHECK(!refs.steps || given.count("step"), ValueError, "[", name_,
               "] the state has no 'step'");
  const double lr = given.at("lr")->item();
  ENCORE_CHECK(std::isfinite(lr) && lr >= 0, ValueError, "[", name_,
               "] learning rate must be finite and >= 0, got ", lr);
  if (refs.steps) {
    const double step = given.at("step")->item();
    ENCORE_CHECK(step >= 0, ValueError, "[", name_, "] state 'step' must be >= 0, got ", step);
  }

  NoGradGuard no_grad;
  for (const auto& [name, where] : expected) {
    auto& [tensors, i] = where;
    const auto it = given.find(name);
    if (it == given.end()) {
      (*tensors)[i] = Tensor();
      continue;
    }
    const char* slot_name = name.c_str() + param_key(i).size() + 1;
    slot(*tensors, i, slot_name).copy_(*it->second);
  }
  if (refs.steps) {
    for (const Tensor& p : params_) {
      Tensor& step = (*refs.steps)[key(p.device())];
      if (!step.defined()) {
        step = zeros({}, DType::Int64, p.device());
        step.set_name(std::string(name_) + ".step");
      }
    }
    for (auto& [k, step] : *refs.steps) step.copy_(given.at("step")->to(step.device()));
  }
  set_lr(lr);
}

void Optimizer::match_param_dtypes() {
  NoGradGuard no_grad;
  for (const auto& [slot_name, tensors] : state_refs().per_param)
    for (size_t i = 0; i < params_.size(); ++i) {
      Tensor& t = (*tensors)[i];
      if (t.defined() && t.dtype() != params_[i].dtype())
        t.set_data(t.detach().to(params_[i].dtype()));
    }
}

void Optimizer::check_param_dtypes(const char* op) const {
  for (const auto& [slot_name, tensors] : const_cast<Optimizer*>(this)->state_refs().per_param)
    for (size_t i = 0; i < params_.size(); ++i) {
      const Tensor& t = (*tensors)[i];
      ENCORE_CHECK(!t.defined() || t.dtype() == params_[i].dtype(), DTypeError, "[", op,
                   "] state '", param_key(i), ".", slot_name, "' is ", encore::name(t.dtype()),
                   " but its parameter is ", encore::name(params_[i].dtype()),
                   " (converted after the ", name_,
                   " optimizer's first step): call optimizer.match_param_dtypes() first");
    }
}

std::vector<Optimizer::Group> Optimizer::groups() const {
  std::vector<std::vector<size_t>> parts = parts_.parts;
  if (parts.empty()) {
    parts.emplace_back(params_.size());
    for (size_t i = 0; i < params_.size(); ++i) parts[0][i] = i;
  }
  std::vector<Group> out;
  std::set<std::pair<int, int>> seen;
  for (size_t k = 0; k < parts.size(); ++k) {
    std::map<std::pair<int, int>, std::vector<size_t>> by_device;
    for (size_t i : parts[k])
      if (params_[i].grad().defined()) by_device[key(params_[i].device())].push_back(i);
    for (auto& [dev, idx] : by_device)
      out.push_back({dev, std::move(idx), k, seen.insert(dev).second});
  }
  return out;
}

void Optimizer::enter(const Group& g) {
  if (parts_.before) parts_.before(g.part);
}

void Optimizer::finish_step() {
  if (parts_.after) parts_.after();
}

void Optimizer::set_update_parts(std::vector<std::vector<size_t>> parts,
                                 std::function<void(size_t)> before, std::function<void()> after,
                                 std::shared_ptr<void> owner) {
  std::vector<int> seen(params_.size(), 0);
  for (const auto& part : parts)
    for (size_t i : part) {
      ENCORE_CHECK(i < params_.size() && !seen[i]++, ValueError, "[", name_,
                   "] update parts must name each parameter once, got index ", i);
    }
  for (size_t i = 0; i < params_.size(); ++i)
    ENCORE_CHECK(parts.empty() || seen[i], ValueError, "[", name_, "] parameter ", i,
                 " is in no update part");
  parts_ = {std::move(parts), std::move(before), std::move(after), std::move(owner)};
}

void check_covers(const Optimizer& optimizer, const Module& module, const char* op) {
  std::set<const TensorImpl*> held;
  for (const Tensor& p : optimizer.params()) held.insert(p.impl());
  std::vector<std::string> missing;
  for (const auto& [name, p] : module.named_parameters())
    if (p.requires_grad() && !held.count(p.impl())) missing.push_back(name);
  if (missing.empty()) return;
  std::string names;
  for (size_t i = 0; i < std::min<size_t>(missing.size(), 8); ++i)
    names += (i ? ", '" : "'") + missing[i] + "'";
  if (missing.size() > 8) names += detail::cat(", ... (", missing.size(), " in all)");
  throw ValueError(detail::cat("[", op, "] the ", optimizer.kind(),
                               " optimizer does not hold the model's parameter",
                               missing.size() > 1 ? "s " : " ", names,
                               ": training would never change them; make the optimizer over "
                               "model.parameters() after build"));
}

SGD::SGD(std::vector<Tensor> params, double lr, SGDOptions options)
    : Optimizer(std::move(params), lr, "sgd"), options_(options) {
  ENCORE_CHECK(std::isfinite(options.momentum) && options.momentum >= 0 &&
                   std::isfinite(options.weight_decay) && options.weight_decay >= 0,
               ValueError, "[sgd] momentum and weight_decay must be finite and >= 0, got ",
               options.momentum, " and ", options.weight_decay);
  ENCORE_CHECK(!options.nesterov || options.momentum > 0, ValueError,
               "[sgd] nesterov needs momentum > 0");
  momentum_.resize(params_.size());
}

void SGD::step() {
  check_param_dtypes(name_);
  clip_gradients();
  NoGradGuard no_grad;
  const bool momentum = options_.momentum > 0;
  for (const Group& g : groups()) {
    enter(g);
    const std::vector<size_t>& idx = g.idx;
    const Device device = params_[idx[0]].device();
    std::vector<Tensor> params, buffers, grads;
    for (size_t i : idx) {
      params.push_back(params_[i]);
      grads.push_back(params_[i].grad());
      if (!momentum) continue;
      if (!momentum_[i].defined()) {
        momentum_[i] = zeros_like(params_[i]);
        momentum_[i].set_name(params_[i].name() + ".momentum");
      }
      buffers.push_back(momentum_[i]);
    }
    sgd_update(params, buffers, grads, lr_tensor(device),
               SgdAttrs{options_.momentum, options_.weight_decay, options_.nesterov});
  }
  finish_step();
}

Optimizer::StateRefs SGD::state_refs() {
  if (options_.momentum == 0) return {};
  return {{{"momentum", &momentum_}}};
}

Adam::Adam(std::vector<Tensor> params, double lr, AdamOptions options)
    : Adam(std::move(params), lr, options, "adam", false) {}

Adam::Adam(std::vector<Tensor> params, double lr, AdamOptions options, const char* name,
           bool decoupled)
    : Optimizer(std::move(params), lr, name), options_(options), decoupled_(decoupled) {
  ENCORE_CHECK(options.beta1 >= 0 && options.beta1 < 1 && options.beta2 >= 0 && options.beta2 < 1 &&
                   std::isfinite(options.epsilon) && options.epsilon > 0 &&
                   std::isfinite(options.weight_decay) && options.weight_decay >= 0,
               ValueError, "[", name,
               "] needs 0 <= beta < 1, finite epsilon > 0 and weight_decay >= 0, got beta1 ",
               options.beta1, ", beta2 ", options.beta2, ", epsilon ", options.epsilon,
               ", weight_decay ", options.weight_decay);
  m_.resize(params_.size());
  v_.resize(params_.size());
}

void Adam::step() {
  check_param_dtypes(name_);
  clip_gradients();
  NoGradGuard no_grad;
  for (const Group& g : groups()) {
    enter(g);
    const std::vector<size_t>& idx = g.idx;
    const Device device = params_[idx[0]].device();
    Tensor& step = step_[g.device];
    if (!step.defined()) {
      step = zeros({}, DType::Int64, device);
      step.set_name("adam.step");
    }
    for (size_t i : idx) {
      if (!m_[i].defined()) {
        m_[i] = zeros_like(params_[i]);
        m_[i].set_name(params_[i].name() + ".m");
      }
      if (!v_[i].defined()) {
        v_[i] = zeros_like(params_[i]);
        v_[i].set_name(params_[i].name() + ".v");
      }
    }
    if (g.first_on_device) step.add_(1);
    std::vector<Tensor> params, m, v, grads;
    for (size_t i : idx) {
      params.push_back(params_[i]);
      m.push_back(m_[i]);
      v.push_back(v_[i]);
      grads.push_back(params_[i].grad());
    }
    adam_update(params, m, v, grads, step, lr_tensor(device),
                AdamAttrs{options_.beta1, options_.beta2, options_.epsilon, options_.weight_decay,
                          decoupled_, options_.epsilon_hat});
  }
  finish_step();
}

Optimizer::StateRefs Adam::state_refs() { return {{{"m", &m_}, {"v", &v_}}, &step_}; }

int64_t Adam::iterations() const {
  return step_.empty() ? 0 : static_cast<int64_t>(step_.begin()->second.item());
}

AdamW::AdamW(std::vector<Tensor> params, double lr, AdamOptions options)
    : Adam(std::move(params), lr, options, "adamw", true) {}

RMSprop::RMSprop(std::vector<Tensor> params, double lr, RMSpropOptions options)
    : Optimizer(std::move(params), lr, "rmsprop"), options_(options) {
  ENCORE_CHECK(options.rho >= 0 && options.rho < 1 && std::isfinite(options.momentum) &&
                   options.momentum >= 0 && std::isfinite(options.epsilon) && options.epsilon > 0,
               ValueError,
               "[rmsprop] needs 0 <= rho < 1, finite momentum >= 0 and epsilon > 0, got rho ",
               options.rho, ", momentum ", options.momentum, ", epsilon ", options.epsilon);
  v_.resize(params_.size());
  momentum_.resize(params_.size());
  mean_grad_.resize(params_.size());
}

void RMSprop::step() {
  check_param_dtypes(name_);
  clip_gradients();
  NoGradGuard no_grad;
  const bool momentum = options_.momentum > 0;
  for (const Group& g : groups()) {
    enter(g);
    const std::vector<size_t>& idx = g.idx;
    std::vector<Tensor> params, v, buf, mean_grad, grads;
    for (size_t i : idx) {
      params.push_back(params_[i]);
      v.push_back(slot(v_, i, "v"));
      if (momentum) buf.push_back(slot(momentum_, i, "momentum"));
      if (options_.centered) mean_grad.push_back(slot(mean_grad_, i, "mean_grad"));
      grads.push_back(params_[i].grad());
    }
    rmsprop_update(
        params, v, buf, mean_grad, grads, lr_tensor(params_[idx[0]].device()),
        RmspropAttrs{options_.rho, options_.momentum, options_.epsilon, options_.centered});
  }
  finish_step();
}

Optimizer::StateRefs RMSprop::state_refs() {
  StateRefs refs{{{"v", &v_}}};
  if (options_.momentum > 0) refs.per_param.emplace_back("momentum", &momentum_);
  if (options_.centered) refs.per_param.emplace_back("mean_grad", &mean_grad_);
  return refs;
}

}  // namespace encore::nn
