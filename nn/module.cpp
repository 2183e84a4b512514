#include "nn/module.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>

#include "autograd/grad_mode.h"
#include "ops/ops.h"

namespace encore::nn {

Shape Module::build(const Shape& input_shape) {
  ENCORE_CHECK(!built_, ValueError, "[", type_name(), "] is already built");
  output_shape_ = build_impl(input_shape);
  built_ = true;
  set_name(name_);
  return output_shape_;
}

Tensor Module::forward(const Tensor& x) {
  ENCORE_CHECK(x.defined(), ValueError, "[", type_name(), "] input is undefined");
  if (!built_) {
    build(x.shape());
    to(x.device());
  }
  return forward_impl(x);
}

Tensor& Module::add_parameter(const std::string& name, Tensor value) {
  value.set_requires_grad(true);
  params_.emplace_back(name, std::move(value));
  return params_.back().second;
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
  for (auto& [n, t] : named_parameters())
    if (t.device() != device) t.set_data(t.detach().to(device));
}

void Module::to(DType dtype) {
  for (auto& [n, t] : named_parameters())
    if (t.dtype() != dtype) t.set_data(t.detach().to(dtype));
}

void Module::set_name(const std::string& prefix) {
  name_ = prefix;
  const std::string p = prefix.empty() ? "" : prefix + ".";
  for (auto& [n, t] : params_) t.set_name(p + n);
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

namespace {
constexpr char kMagic[8] = {'E', 'N', 'C', 'O', 'R', 'E', 'P', '1'};

template <class T> void put(std::ofstream& f, T v) { f.write(reinterpret_cast<const char*>(&v), sizeof v); }
template <class T> T get(std::ifstream& f, const std::string& path) {
  T v{};
  f.read(reinterpret_cast<char*>(&v), sizeof v);
  ENCORE_CHECK(f, ValueError, "[load] ", path, " is truncated");
  return v;
}
}  // namespace

void save(const Module& module, const std::string& path) {
  std::ofstream f(path, std::ios::binary);
  ENCORE_CHECK(f, ValueError, "[save] cannot open ", path, " for writing");
  const NamedTensors params = module.named_parameters();
  f.write(kMagic, sizeof kMagic);
  put<uint64_t>(f, params.size());
  for (const auto& [name, t] : params) {
    put<uint64_t>(f, name.size());
    f.write(name.data(), static_cast<std::streamsize>(name.size()));
    put<uint8_t>(f, static_cast<uint8_t>(t.dtype()));
    put<uint8_t>(f, static_cast<uint8_t>(t.dim()));
    for (int64_t d : t.shape()) put<int64_t>(f, d);
    const Tensor host = t.detach().to(Device::cpu()).contiguous();
    f.write(static_cast<const char*>(host.data_ptr()), static_cast<std::streamsize>(host.nbytes()));
  }
  ENCORE_CHECK(f, ValueError, "[save] failed writing ", path);
}

void load(Module& module, const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  ENCORE_CHECK(f, ValueError, "[load] cannot open ", path);
  char magic[8];
  f.read(magic, sizeof magic);
  ENCORE_CHECK(f && std::memcmp(magic, kMagic, sizeof kMagic) == 0, ValueError, "[load] ", path,
               " is not an encore parameter file");
  std::map<std::string, Tensor> by_name;
  for (auto& [name, t] : module.named_parameters()) by_name[name] = t;
  const auto count = get<uint64_t>(f, path);
  ENCORE_CHECK(count == by_name.size(), ValueError, "[load] ", path, " holds ", count,
               " parameters but the model has ", by_name.size());
  for (uint64_t i = 0; i < count; ++i) {
    const auto len = get<uint64_t>(f, path);
    ENCORE_CHECK(len < 4096, ValueError, "[load] ", path, " is corrupt");
    std::string name(len, '\0');
    f.read(name.data(), static_cast<std::streamsize>(len));
    const auto dtype = static_cast<DType>(get<uint8_t>(f, path));
    const auto rank = get<uint8_t>(f, path);
    ENCORE_CHECK(rank <= kMaxDims, ValueError, "[load] ", path, " is corrupt");
    Shape shape;
    for (int d = 0; d < rank; ++d) shape.push_back(get<int64_t>(f, path));
    auto it = by_name.find(name);
    ENCORE_CHECK(it != by_name.end(), ValueError, "[load] parameter '", name, "' in ", path,
                 " does not exist in the model");
    Tensor& dst = it->second;
    ENCORE_CHECK(dst.shape() == shape && dst.dtype() == dtype, ShapeError, "[load] parameter '", name,
                 "' is ", shape.str(), " ", encore::name(dtype), " in ", path, " but ", describe(dst),
                 " in the model");
    Tensor host = Tensor::empty(shape, dtype);
    f.read(static_cast<char*>(host.data_ptr()), static_cast<std::streamsize>(host.nbytes()));
    ENCORE_CHECK(f, ValueError, "[load] ", path, " is truncated");
    NoGradGuard no_grad;
    dst.copy_(host);
  }
}

}  // namespace encore::nn
