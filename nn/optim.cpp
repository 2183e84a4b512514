#include "nn/optim.h"

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
  ENCORE_CHECK(!params_.empty(), ValueError, "[", name, "] got no parameters: build the model first ",
               "(model.build(input_shape)) and pass model.parameters()");
  ENCORE_CHECK(lr > 0, ValueError, "[", name, "] learning rate must be positive, got ", lr);
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

void Optimizer::zero_grad(bool set_to_none) {
  for (Tensor& p : params_) {
    // Setting to None never reads the old gradient: a traced step that starts with
    // zero_grad() does not depend on (or retrace for) whether a gradient existed before.
    if (set_to_none) {
      p.set_grad(Tensor());
      continue;
    }
    Tensor g = p.grad();
    if (!g.defined()) continue;
    NoGradGuard no_grad;
    g.zero_();
  }
}

double Optimizer::lr() const {
  if (lr_tensors_.empty()) return lr_;
  return lr_tensors_.begin()->second.item();
}

void Optimizer::set_lr(double lr) {
  ENCORE_CHECK(lr > 0, ValueError, "[", name_, "] learning rate must be positive, got ", lr);
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

std::map<std::pair<int, int>, std::vector<size_t>> Optimizer::groups() const {
  std::map<std::pair<int, int>, std::vector<size_t>> g;
  for (size_t i = 0; i < params_.size(); ++i)
    if (params_[i].grad().defined()) g[key(params_[i].device())].push_back(i);
  return g;
}

SGD::SGD(std::vector<Tensor> params, double lr, SGDOptions options)
    : Optimizer(std::move(params), lr, "sgd"), options_(options) {
  ENCORE_CHECK(options.momentum >= 0 && options.weight_decay >= 0, ValueError,
               "[sgd] momentum and weight_decay must be >= 0");
  ENCORE_CHECK(!options.nesterov || options.momentum > 0, ValueError, "[sgd] nesterov needs momentum > 0");
  momentum_.resize(params_.size());
}

void SGD::step() {
  NoGradGuard no_grad;
  const bool momentum = options_.momentum > 0;
  for (auto& [dev, idx] : groups()) {
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
}

NamedTensors SGD::state() const {
  NamedTensors s;
  for (size_t i = 0; i < params_.size(); ++i)
    if (momentum_[i].defined()) s.emplace_back(params_[i].name() + ".momentum", momentum_[i]);
  return s;
}

Adam::Adam(std::vector<Tensor> params, double lr, AdamOptions options)
    : Optimizer(std::move(params), lr, "adam"), options_(options) {
  ENCORE_CHECK(options.beta1 >= 0 && options.beta1 < 1 && options.beta2 >= 0 && options.beta2 < 1 &&
                   options.epsilon > 0 && options.weight_decay >= 0,
               ValueError, "[adam] needs 0 <= beta < 1, epsilon > 0, weight_decay >= 0");
  m_.resize(params_.size());
  v_.resize(params_.size());
}

void Adam::step() {
  NoGradGuard no_grad;
  for (auto& [dev, idx] : groups()) {
    const Device device = params_[idx[0]].device();
    Tensor& step = step_[dev];
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
    step.add_(1);
    std::vector<Tensor> params, m, v, grads;
    for (size_t i : idx) {
      params.push_back(params_[i]);
      m.push_back(m_[i]);
      v.push_back(v_[i]);
      grads.push_back(params_[i].grad());
    }
    adam_update(params, m, v, grads, step, lr_tensor(device),
                AdamAttrs{options_.beta1, options_.beta2, options_.epsilon, options_.weight_decay});
  }
}

NamedTensors Adam::state() const {
  NamedTensors s;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (m_[i].defined()) s.emplace_back(params_[i].name() + ".m", m_[i]);
    if (v_[i].defined()) s.emplace_back(params_[i].name() + ".v", v_[i]);
  }
  for (const auto& [k, t] : step_) s.emplace_back("step", t);
  return s;
}

int64_t Adam::iterations() const {
  return step_.empty() ? 0 : static_cast<int64_t>(step_.begin()->second.item());
}

}  // namespace encore::nn
