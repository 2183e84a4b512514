#include "ops/examples.h"

#include <algorithm>
#include <numeric>

#include "ops/ops.h"
#include "ops/random.h"

namespace encore {

namespace {

Tensor make_input(const ExampleInput& e, DType float_dtype, Device device, Generator& gen) {
  const Shape& s = e.shape;
  Tensor t;
  switch (e.values) {
    case ExampleInput::Uniform: {
      // Never closer to zero than 0.05: no accidental kinks (relu, abs) at zero.
      const Tensor u = uniform(s, 0.05, 1.0, DType::Float64, Device::cpu(), &gen);
      const Tensor sign =
          gt(uniform(s, 0.0, 1.0, DType::Float64, Device::cpu(), &gen), 0.5) * 2.0 - 1.0;
      t = u * sign;
      break;
    }
    case ExampleInput::Positive:
      t = uniform(s, 0.5, 1.5, DType::Float64, Device::cpu(), &gen);
      break;
    case ExampleInput::Distinct: {
      // A permutation of -1 + (2i + 1) / n: values 2/n apart, none of them zero.
      const int64_t n = s.numel();
      std::vector<double> v(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i)
        v[i] = -1.0 + (2.0 * static_cast<double>(i) + 1.0) / static_cast<double>(n);
      const std::vector<double> keys =
          uniform({n}, 0.0, 1.0, DType::Float64, Device::cpu(), &gen).to_vector<double>();
      std::vector<int64_t> order(static_cast<size_t>(n));
      std::iota(order.begin(), order.end(), 0);
      std::sort(order.begin(), order.end(),
                [&](int64_t a, int64_t b) { return keys[a] < keys[b]; });
      std::vector<double> permuted(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) permuted[i] = v[order[i]];
      t = from_vector(permuted, s);
      break;
    }
    case ExampleInput::Index: {
      const Tensor u =
          uniform(s, 0.0, static_cast<double>(e.bound), DType::Float64, Device::cpu(), &gen);
      return clip(u.to(DType::Int64), 0, e.bound - 1).to(device);
    }
    case ExampleInput::State:
      return Generator(7, device).state().clone();
  }
  return t.to(float_dtype).to(device);
}

}  // namespace

std::vector<Tensor> example_inputs(const Example& e, DType float_dtype, Device device,
                                   uint64_t seed) {
  Generator gen(seed);
  std::vector<Tensor> in;
  for (const ExampleInput& i : e.inputs) in.push_back(make_input(i, float_dtype, device, gen));
  return in;
}

std::vector<std::pair<std::string, ArgValue>> example_keywords(const OpDef& def, const Example& e,
                                                               Device device) {
  std::vector<std::pair<std::string, ArgValue>> kw = parse_keyword_literals(e.args);
  const Signature& sig = signature_of(def);
  const int d = sig.index_of("device");
  const bool given =
      std::any_of(kw.begin(), kw.end(), [](const auto& k) { return k.first == "device"; });
  if (d >= 0 && !given && sig.params[d].type == ParamType::Device)
    kw.emplace_back("device", device);
  return kw;
}

Tensor example_input(const ExampleInput& e, DType float_dtype, Device device, uint64_t seed) {
  Generator gen(seed);
  return make_input(e, float_dtype, device, gen);
}

Outputs run_example(const OpDef& def, const Example& e, std::span<const Tensor> inputs,
                    Device device) {
  if (e.call) return e.call(inputs);
  ENCORE_CHECK(def.invoke, ValueError, "[", def.name,
               "] has neither a public function nor an example call");
  return def.invoke(CallArgs::bind(signature_of(def), inputs, example_keywords(def, e, device)));
}

}  // namespace encore
