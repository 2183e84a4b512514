// Gradcheck of every differentiable op in the registry, in float64 against central finite
// differences. The cases are keyed by op name: an op added to the registry without a case
// here fails `EveryDifferentiableOpHasACase`.
#include <functional>
#include <map>

#include "autograd/gradcheck.h"
#include "helpers.h"
#include "ops/dispatch.h"

namespace encore {
namespace {

using test::rand64;
using Fn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

struct Case {
  Fn fn;
  std::vector<Tensor> inputs;
  GradcheckOptions options = {};
};

// Inputs bounded away from kinks and singularities for the ops that have them.
Tensor positive(const Shape& s, uint64_t seed) { return rand64(s, seed) * 0.4 + 1.0; }
Tensor away_from_zero(const Shape& s, uint64_t seed) {
  const Tensor r = rand64(s, seed);
  return r + (gt(r, 0.0) - lt(r, 0.0)) * 0.2;  // |x| >= 0.2
}

Fn one(Tensor (*f)(const Tensor&)) {
  return [f](const std::vector<Tensor>& x) { return std::vector<Tensor>{f(x[0])}; };
}
Fn two(Tensor (*f)(const Tensor&, const Tensor&)) {
  return [f](const std::vector<Tensor>& x) { return std::vector<Tensor>{f(x[0], x[1])}; };
}

std::map<std::string, Case> cases() {
  std::map<std::string, Case> c;
  const Shape s{3, 4};
  // elementwise
  c["neg"] = {one(neg), {rand64(s)}};
  c["exp"] = {one(exp), {rand64(s)}};
  c["log"] = {one(log), {positive(s, 2)}};
  c["sqrt"] = {one(sqrt), {positive(s, 3)}};
  c["tanh"] = {one(tanh), {rand64(s)}};
  c["sigmoid"] = {one(sigmoid), {rand64(s)}};
  c["relu"] = {one(relu), {away_from_zero(s, 4)}};
  c["abs"] = {one(abs), {away_from_zero(s, 5)}};
  c["softplus"] = {one(softplus), {rand64(s) * 5.0}};
  c["leaky_relu"] = {[](auto& x) { return std::vector<Tensor>{leaky_relu(x[0], 0.1)}; }, {away_from_zero(s, 6)}};
  c["pow_scalar"] = {[](auto& x) { return std::vector<Tensor>{pow(x[0], 2.5)}; }, {positive(s, 7)}};
  c["add_scalar"] = {[](auto& x) { return std::vector<Tensor>{x[0] + 1.5}; }, {rand64(s)}};
  c["mul_scalar"] = {[](auto& x) { return std::vector<Tensor>{x[0] * -2.5}; }, {rand64(s)}};
  c["clip"] = {[](auto& x) { return std::vector<Tensor>{clip(x[0], -0.5, 0.5)}; },
               {from_vector<double>({-0.9, -0.3, 0.1, 0.45, 0.7, -0.6}, {2, 3})}};
  // broadcasting binary ops: (3, 4) with (4,) and (3, 1)
  c["add"] = {two(add), {rand64(s, 8), rand64({4}, 9)}};
  c["sub"] = {two(sub), {rand64({3, 1}, 10), rand64(s, 11)}};
  c["mul"] = {two(mul), {rand64(s, 12), rand64({3, 1}, 13)}};
  c["div"] = {two(div), {rand64(s, 14), positive({4}, 15)}};
  c["maximum"] = {two(maximum), {rand64(s, 16), rand64(s, 17)}};
  c["minimum"] = {two(minimum), {rand64(s, 18), rand64({4}, 19)}};
  // reductions
  c["sum"] = {[](auto& x) { return std::vector<Tensor>{sum(x[0], {1}), sum(x[0], {0}, true), sum(x[0])}; },
              {rand64({2, 3, 4})}};
  c["max"] = {[](auto& x) { return std::vector<Tensor>{max(x[0], {2}), max(x[0], {0, 1}, true)}; },
              {rand64({2, 3, 4}, 20)}};
  // views
  c["reshape"] = {[](auto& x) { return std::vector<Tensor>{x[0].reshape({4, 3}) * rand64({4, 3}, 21)}; },
                  {rand64(s)}};
  c["permute"] = {[](auto& x) { return std::vector<Tensor>{x[0].permute({2, 0, 1}).contiguous()}; },
                  {rand64({2, 3, 4})}};
  c["slice"] = {[](auto& x) { return std::vector<Tensor>{x[0].slice(1, 1, 4, 2), x[0].slice(0, 0, 2)}; },
                {rand64({3, 5})}};
  c["expand"] = {[](auto& x) { return std::vector<Tensor>{x[0].expand({3, 2, 4}) * rand64({3, 2, 4}, 22)}; },
                 {rand64({2, 1})}};
  // data movement
  c["copy"] = {[](auto& x) { return std::vector<Tensor>{x[0].transpose(0, 1).clone()}; }, {rand64(s)}};
  // Through float32 the function is a staircase at float64 resolution: use a coarse step.
  c["cast"] = {[](auto& x) { return std::vector<Tensor>{x[0].to(DType::Float32).to(DType::Float64)}; },
               {rand64(s)},
               {1e-3, 1e-4, 1e-3}};
  // CPU to CPU here; host <-> GPU transfers are checked in test_cuda_ops.cpp.
  c["to_device"] = {[](auto& x) { return std::vector<Tensor>{call(OpId::to_device, {x[0]}, DeviceAttrs{Device::cpu()})}; },
                    {rand64(s)}};
  c["concat"] = {[](auto& x) { return std::vector<Tensor>{concat({x[0], x[1], x[0]}, 1)}; },
                 {rand64({2, 3}, 23), rand64({2, 2}, 24)}};
  c["slice_grad"] = {[](auto& x) {
                       return std::vector<Tensor>{call(OpId::slice_grad, {x[0]},
                                                       SliceAttrs{1, 1, 6, 2, Shape{2, 7}})};
                     },
                     {rand64({2, 3})}};
  c["flip"] = {[](auto& x) { return std::vector<Tensor>{flip(x[0], 1)}; }, {rand64({2, 3, 2})}};
  // linear algebra and convolution
  c["matmul"] = {[](auto& x) { return std::vector<Tensor>{matmul(x[0], x[1])}; },
                 {rand64({2, 3, 4}, 25), rand64({4, 5}, 26)}};
  c["conv1d"] = {[](auto& x) {
                   return std::vector<Tensor>{conv1d(x[0], x[1], 2, Padding::same(), 1),
                                              conv1d(x[0], x[1], 1, Padding::valid(), 2)};
                 },
                 {rand64({2, 9, 3}, 27), rand64({3, 3, 4}, 28)}};
  // neural-network building blocks
  c["softmax"] = {[](auto& x) { return std::vector<Tensor>{softmax(x[0], 1)}; }, {rand64({2, 4, 3})}};
  c["log_softmax"] = {[](auto& x) { return std::vector<Tensor>{log_softmax(x[0], -1)}; }, {rand64({2, 4, 3})}};
  c["dropout"] = {[](auto& x) {
                    Generator g(7);  // the same mask for every evaluation
                    return std::vector<Tensor>{dropout(x[0], 0.4, true, &g)};
                  },
                  {rand64({4, 8})}};
  const Tensor labels = from_vector<int64_t>({2, 0, 3}, {3});
  c["gather_last"] = {[](auto& x) { return std::vector<Tensor>{gather_last(x[0], x[1])}; },
                      {rand64({3, 4}), labels}};
  c["scatter_last"] = {[](auto& x) { return std::vector<Tensor>{scatter_last(x[0], x[1], 5)}; },
                       {rand64({3}), labels}};
  c["lstm_cell"] = {[](auto& x) {
                      auto [h, c1] = lstm_cell(x[0], x[1], Activation::Tanh, Activation::Sigmoid);
                      auto [h2, c2] = lstm_cell(x[0], x[1], Activation::Relu, Activation::HardSigmoid);
                      return std::vector<Tensor>{h, c1, h2, c2};
                    },
                    {away_from_zero({2, 12}, 29), rand64({2, 3}, 30)}};
  return c;
}

TEST(Gradcheck, EveryDifferentiableOpHasACase) {
  const auto c = cases();
  for (const OpDef& def : all_op_defs()) {
    if (!def.differentiable() || !def.kernel[0]) continue;  // CUDA-only ops: tests/cpp/test_cuda_ops.cpp
    EXPECT_TRUE(c.count(def.name)) << "no gradcheck case for differentiable op '" << def.name << "'";
  }
}

class GradcheckOp : public ::testing::TestWithParam<std::string> {};

TEST_P(GradcheckOp, MatchesFiniteDifferences) {
  const Case c = cases().at(GetParam());
  const GradcheckResult r = gradcheck(c.fn, c.inputs, c.options);
  EXPECT_TRUE(r.ok) << GetParam() << ": max abs error " << r.max_abs_error << "\n" << r.report;
}

std::vector<std::string> case_names() {
  std::vector<std::string> names;
  for (const auto& [name, c] : cases()) names.push_back(name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(AllOps, GradcheckOp, ::testing::ValuesIn(case_names()),
                         [](const auto& info) { return info.param; });

TEST(Gradcheck, DetectsAWrongGradient) {
  // A function whose gradient is deliberately cut: detach() hides x from autograd.
  const GradcheckResult r = gradcheck(
      [](auto& x) { return std::vector<Tensor>{x[0] * x[0].detach()}; }, {rand64({3})});
  EXPECT_FALSE(r.ok);
}

}  // namespace
}  // namespace encore
