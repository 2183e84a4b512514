#include "nn/resume.h"

#include <set>

#include "core/modes.h"
#include "ops/random.h"

namespace encore::nn {

namespace {

constexpr const char* kParts = "checkpoint.parts";
constexpr const char* kOptimizer = "checkpoint.optimizer";

// The devices the parameters live on, each once, in order.
std::vector<Device> devices_of(const NamedTensors& params) {
  std::vector<Device> out;
  for (const auto& [n, p] : params)
    if (std::find(out.begin(), out.end(), p.device()) == out.end()) out.push_back(p.device());
  if (out.empty()) out.push_back(Device::cpu());
  return out;
}

std::string generator_key(Device d) { return "generator/" + d.str(); }

}  // namespace

void save_checkpoint(const std::string& path, const Module& module, const Optimizer* optimizer,
                     const Metadata& extra) {
  check_path(path, "save_checkpoint");
  NamedTensors tensors;
  const NamedTensors params = module.named_weights();  // parameters and buffers
  for (const auto& [name, p] : params) tensors.emplace_back("model/" + name, p);
  Metadata meta = extra;
  for (const char* reserved : {kParts, kOptimizer})
    ENCORE_CHECK(!meta.count(reserved), ValueError, "[save_checkpoint] metadata key '", reserved,
                 "' is written by save_checkpoint");
  meta[kParts] = optimizer ? "model,optimizer,generator" : "model,generator";
  if (optimizer) {
    optimizer->check_param_dtypes("save_checkpoint");
    meta[kOptimizer] = optimizer->kind();
    for (const auto& [name, t] : optimizer->state()) tensors.emplace_back("optimizer/" + name, t);
  }
  for (Device d : devices_of(params))
    tensors.emplace_back(generator_key(d), Generator::default_for(d).state());
  save_tensors(path, tensors, meta);
}

Metadata load_checkpoint(const std::string& path, Module& module, Optimizer* optimizer) {
  check_path(path, "load_checkpoint");
  const TensorFile file = load_tensors(path);
  const auto parts = file.metadata.find(kParts);
  ENCORE_CHECK(parts != file.metadata.end(), ValueError, "[load_checkpoint] ", path,
               " is not a training checkpoint (no '", kParts,
               "' in its metadata): load parameters with nn::load");
  const bool has_optimizer = parts->second == "model,optimizer,generator";
  ENCORE_CHECK(has_optimizer || parts->second == "model,generator", ValueError,
               "[load_checkpoint] ", path, " has unknown parts '", parts->second, "'");
  if (optimizer) {
    ENCORE_CHECK(has_optimizer, ValueError, "[load_checkpoint] ", path,
                 " holds no optimizer state");
    const std::string kind = file.metadata.count(kOptimizer) ? file.metadata.at(kOptimizer) : "";
    ENCORE_CHECK(kind == optimizer->kind(), ValueError, "[load_checkpoint] ", path,
                 " holds the state of a '", kind, "' optimizer, not of a '", optimizer->kind(),
                 "' one");
  }

  // Sort the file's tensors into parts; check everything before changing anything.
  std::map<std::string, const Tensor*> model;
  NamedTensors opt_state;
  std::map<std::string, const Tensor*> generators;
  for (const auto& [name, t] : file.tensors) {
    if (name.starts_with("model/")) {
      model.emplace(name.substr(6), &t);
    } else if (name.starts_with("optimizer/") && has_optimizer) {
      opt_state.emplace_back(name.substr(10), t);
    } else if (name.starts_with("generator/")) {
      generators.emplace(name, &t);
    } else {
      throw ValueError(
          detail::cat("[load_checkpoint] tensor '", name, "' in ", path, " belongs to no part"));
    }
  }
  const NamedTensors params = module.named_weights();  // parameters and buffers
  std::set<std::string> names;
  for (const auto& [name, p] : params) {
    ENCORE_CHECK(names.insert(name).second, ValueError,
                 "[load_checkpoint] the model has two weights named '", name, "'");
    const auto it = model.find(name);
    ENCORE_CHECK(it != model.end(), ValueError, "[load_checkpoint] ", path,
                 " has no tensor 'model/", name, "' for the model's parameter ", describe(p));
    ENCORE_CHECK(it->second->shape() == p.shape(), ShapeError, "[load_checkpoint] parameter '",
                 name, "' is ", p.shape().str(), " in the model but ", it->second->shape().str(),
                 " in ", path);
    ENCORE_CHECK(it->second->dtype() == p.dtype(), ValueError, "[load_checkpoint] parameter '",
                 name, "' is ", encore::name(p.dtype()), " in the model but ",
                 encore::name(it->second->dtype()), " in ", path);
  }
  for (const auto& [name, t] : model)
    ENCORE_CHECK(names.count(name), ValueError, "[load_checkpoint] tensor 'model/", name, "' in ",
                 path, " is not a parameter or buffer of the model",
                 params.empty() ? " (the model has none: build it first)" : "");
  const std::vector<Device> devices = devices_of(params);
  for (Device d : devices) {
    const auto it = generators.find(generator_key(d));
    ENCORE_CHECK(it != generators.end(), ValueError, "[load_checkpoint] ", path,
                 " has no state for the ", d.str(), " generator");
    ENCORE_CHECK(it->second->shape() == Shape{2} && it->second->dtype() == DType::Int64, ValueError,
                 "[load_checkpoint] generator state '", it->first, "' in ", path,
                 " must be int64 (2,), got ", describe(*it->second));
  }

  // The optimizer checks its part before it changes; nothing can fail after it.
  if (optimizer) optimizer->load_state(opt_state);
  NoGradGuard no_grad;
  for (const auto& [name, p] : params) Tensor(p).copy_(*model.at(name));
  for (Device d : devices)
    Tensor(Generator::default_for(d).state()).copy_(*generators.at(generator_key(d)));
  return file.metadata;
}

}  // namespace encore::nn
