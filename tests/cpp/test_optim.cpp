// Optimizer features of issue 11: AdamW and Keras' epsilon placement, RMSprop, gradient
// clipping, and optimizer state saved and restored exactly.
#include <cmath>

#include "core/modes.h"
#include "graph/trace.h"
#include "helpers.h"
#include "nn/layers.h"
#include "nn/losses.h"
#include "nn/optim.h"
#include "ops/optim.h"

namespace encore {
namespace {

using test::bitwise_equal;
using test::expect_values;

Tensor param(std::vector<float> v, const char* name = "w") {
  Tensor p = from_vector<float>(v, {static_cast<int64_t>(v.size())}).set_requires_grad();
  p.set_name(name);
  return p;
}

// Reference Adam in double: decoupled (AdamW) or L2 weight decay, PyTorch's or Keras' epsilon.
struct AdamRef {
  double lr, wd, eps;
  bool decoupled, epsilon_hat;
  std::vector<double> w, m, v;
  void step(const std::vector<double>& g0, int t) {
    for (size_t i = 0; i < w.size(); ++i) {
      double g = g0[i];
      if (decoupled)
        w[i] *= 1 - lr * wd;
      else
        g += wd * w[i];
      m[i] = 0.9 * m[i] + 0.1 * g;
      v[i] = 0.999 * v[i] + 0.001 * g * g;
      const double bc1 = 1 - std::pow(0.9, t), bc2 = 1 - std::pow(0.999, t);
      if (epsilon_hat)  // Keras: alpha = lr sqrt(bc2) / bc1; w -= alpha m / (sqrt(v) + eps)
        w[i] -= lr * std::sqrt(bc2) / bc1 * m[i] / (std::sqrt(v[i]) + eps);
      else
        w[i] -= lr / bc1 * m[i] / (std::sqrt(v[i] / bc2) + eps);
    }
  }
};

TEST(Optimizers, AdamWAndEpsilonHatAgainstHandComputed) {
  for (bool decoupled : {false, true}) {
    for (bool hat : {false, true}) {
      // Gradients near epsilon, where the placements differ most.
      const std::vector<double> g = {3e-7, -2e-6};
      Tensor p = param({1, -2});
      nn::AdamOptions o{.epsilon = 1e-7, .weight_decay = 0.1, .epsilon_hat = hat};
      std::unique_ptr<nn::Optimizer> opt;
      if (decoupled)
        opt = std::make_unique<nn::AdamW>(std::vector<Tensor>{p}, 0.1, o);
      else
        opt = std::make_unique<nn::Adam>(std::vector<Tensor>{p}, 0.1, o);
      AdamRef ref{0.1, 0.1, 1e-7, decoupled, hat, {1, -2}, {0, 0}, {0, 0}};
      for (int t = 1; t <= 3; ++t) {
        p.set_grad(from_vector<float>({3e-7f, -2e-6f}, {2}));
        opt->step();
        ref.step(g, t);
        expect_values(p, ref.w, 1e-6);
      }
      EXPECT_STREQ(opt->kind(), decoupled ? "adamw" : "adam");
    }
  }
}

TEST(Optimizers, EpsilonPlacementsDifferForTinyGradients) {
  std::vector<float> moved;
  for (bool hat : {false, true}) {
    Tensor p = param({0});
    nn::Adam adam({p}, 1.0, {.epsilon_hat = hat});
    p.set_grad(from_vector<float>({1e-6f}, {1}));
    adam.step();
    moved.push_back(-p.item());
  }
  // PyTorch's step: 1e-6 / (1e-6 + 1e-7); Keras': sqrt(0.001) 1e-6 / (sqrt(0.001) 1e-6 + 1e-7).
  EXPECT_NEAR(moved[0], 1e-6 / (1e-6 + 1e-7), 1e-5);
  EXPECT_NEAR(moved[1], 3.1623e-8 / (3.1623e-8 + 1e-7), 1e-3);
  EXPECT_GT(moved[0] / moved[1], 3.0);
}

TEST(Optimizers, RmspropAgainstHandComputed) {
  for (double momentum : {0.0, 0.5}) {
    for (bool centered : {false, true}) {
      Tensor p = param({1, -2});
      nn::RMSprop opt({p}, 0.01, {.momentum = momentum, .centered = centered});
      double w[2] = {1, -2}, v[2] = {0, 0}, buf[2] = {0, 0}, mg[2] = {0, 0};
      const double g[2] = {0.5, -0.25};
      for (int t = 0; t < 3; ++t) {
        p.set_grad(from_vector<float>({0.5f, -0.25f}, {2}));
        opt.step();
        for (int i = 0; i < 2; ++i) {
          v[i] = 0.9 * v[i] + 0.1 * g[i] * g[i];
          double denom = v[i];
          if (centered) {
            mg[i] = 0.9 * mg[i] + 0.1 * g[i];
            denom -= mg[i] * mg[i];
          }
          const double inc = 0.01 * g[i] / std::sqrt(denom + 1e-7);
          buf[i] = momentum * buf[i] + inc;
          w[i] -= momentum > 0 ? buf[i] : inc;
        }
        expect_values(p, {w[0], w[1]}, 1e-5);
      }
      // v, plus the momentum and mean-gradient slots it has, plus lr.
      EXPECT_EQ(opt.state().size(), 2u + (momentum > 0) + centered);
    }
  }
}

TEST(Optimizers, ClippingByGlobalNormAndByValue) {
  // Gradients (3, 4) and (12): global norm 13.
  Tensor a = param({0, 0}, "a"), b = param({0}, "b");
  nn::SGD sgd({a, b}, 1.0);
  sgd.set_clipping({.global_norm = 6.5});
  a.set_grad(from_vector<float>({3, 4}, {2}));
  b.set_grad(from_vector<float>({12}, {1}));
  sgd.step();
  const double s = 6.5 / (13 + 1e-6);
  expect_values(a, {-3 * s, -4 * s}, 1e-6);
  expect_values(b, {-12 * s}, 1e-6);
  // Below the threshold nothing changes.
  sgd.set_clipping({.global_norm = 100});
  a.set_grad(from_vector<float>({3, 4}, {2}));
  b.set_grad(Tensor());
  sgd.step();
  expect_values(a, {-3 * s - 3, -4 * s - 4}, 1e-5);

  sgd.set_clipping({.value = 3.5});
  a.set_grad(from_vector<float>({-5, 1}, {2}));
  b.set_grad(from_vector<float>({12}, {1}));
  sgd.step();
  expect_values(a.grad(), {-3.5, 1});
  expect_values(b, {-12 * s - 3.5}, 1e-5);

  EXPECT_THROW(sgd.set_clipping({.global_norm = 1, .value = 1}), ValueError);
  EXPECT_THROW(sgd.set_clipping({.global_norm = -1}), ValueError);
}

// A traced step with clipping and AdamW gives the eager step's bits, without retracing when
// the learning rate changes.
TEST(Optimizers, ClippedStepTracesBitwise) {
  auto run = [](bool traced) {
    manual_seed(3);
    nn::Dense dense(2);
    dense.build({4, 3});
    nn::AdamW opt(dense.parameters(), 0.05);
    opt.set_clipping({.global_norm = 0.1});
    auto body = [&](const Tensor& x, const Tensor& y) {
      opt.zero_grad();
      Tensor loss = nn::mean_squared_error(y, dense(x));
      loss.backward();
      opt.step();
      return loss;
    };
    auto f = trace(body);
    Generator data(9);
    std::vector<Tensor> out;
    for (int i = 0; i < 5; ++i) {
      if (i == 3) opt.set_lr(0.01);
      const Tensor x = uniform({4, 3}, -1, 1, DType::Float32, Device::cpu(), &data);
      const Tensor y = uniform({4, 2}, -1, 1, DType::Float32, Device::cpu(), &data);
      out.push_back(traced ? f(x, y) : body(x, y));
    }
    if (traced) {
      EXPECT_EQ(f.stats().traces, 1);
    }
    out.push_back(dense.parameters()[0].clone());
    return out;
  };
  const auto eager = run(false), traced = run(true);
  for (size_t i = 0; i < eager.size(); ++i) EXPECT_TRUE(bitwise_equal(eager[i], traced[i])) << i;
}

TEST(OptimizerState, RestoresExactlyAndKeepsCapturedTensors) {
  auto grads = [](Tensor& p, float g) { p.set_grad(full_like(p, g)); };
  Tensor p = param({1, 2}, "p");
  nn::Adam adam({p}, 0.1);
  for (int i = 0; i < 2; ++i) {
    grads(p, 0.5f);
    adam.step();
  }
  const nn::NamedTensors saved = [&] {
    nn::NamedTensors s;
    for (auto& [n, t] : adam.state()) s.emplace_back(n, t.clone());
    return s;
  }();
  const Tensor p_saved = p.detach().clone();
  // Continue two more steps: the reference.
  for (int i = 0; i < 2; ++i) {
    grads(p, -0.25f);
    adam.step();
  }
  const Tensor reference = p.clone();

  // A fresh optimizer over the saved parameter values, loaded from the saved state.
  Tensor q = p_saved.clone();
  q.set_requires_grad();
  q.set_name("p");
  nn::Adam fresh({q}, 0.7);
  fresh.load_state(saved);
  EXPECT_EQ(fresh.iterations(), 2);
  EXPECT_DOUBLE_EQ(fresh.lr(), 0.1);
  for (int i = 0; i < 2; ++i) {
    grads(q, -0.25f);
    fresh.step();
  }
  EXPECT_TRUE(bitwise_equal(reference, q));

  // Loading again writes the existing tensors in place.
  const TensorImpl* m_before = fresh.state()[0].second.impl();
  fresh.load_state(saved);
  EXPECT_EQ(fresh.state()[0].second.impl(), m_before);
}

TEST(OptimizerState, LoadIsStrictAndAllOrNothing) {
  Tensor p = param({1, 2}, "p");
  nn::Adam adam({p}, 0.1);
  p.set_grad(full_like(p, 1.0f));
  adam.step();
  const nn::NamedTensors good = adam.state();
  const Tensor m_before = adam.state()[0].second.clone();

  auto without = [&](const std::string& name) {
    nn::NamedTensors s;
    for (auto& [n, t] : good)
      if (n != name) s.emplace_back(n, t);
    return s;
  };
  auto with = [&](const std::string& name, Tensor t) {
    nn::NamedTensors s = good;
    for (auto& [n, v] : s)
      if (n == name) v = t;
    if (std::none_of(s.begin(), s.end(), [&](auto& e) { return e.first == name; }))
      s.emplace_back(name, t);
    return s;
  };
  EXPECT_THROW(adam.load_state(without("lr")), ValueError);
  EXPECT_THROW(adam.load_state(without("step")), ValueError);
  EXPECT_THROW(adam.load_state(with("p.m", zeros({3}))), ShapeError);
  EXPECT_THROW(adam.load_state(with("p.m", zeros({2}, DType::Float64))), ValueError);
  EXPECT_THROW(adam.load_state(with("p.momentum", zeros({2}))), ValueError);  // SGD's slot
  EXPECT_THROW(adam.load_state(with("q.m", zeros({2}))), ValueError);
  EXPECT_THROW(adam.load_state(with("lr", full({}, -1.0, DType::Float64))), ValueError);
  EXPECT_THROW(adam.load_state(with("step", zeros({2}, DType::Int64))), ValueError);
  EXPECT_TRUE(bitwise_equal(adam.state()[0].second, m_before));
  EXPECT_EQ(adam.iterations(), 1);

  // SGD state into SGD; into Adam it is refused.
  Tensor w = param({1}, "w");
  nn::SGD sgd({w}, 0.1, {.momentum = 0.9});
  w.set_grad(full_like(w, 1.0f));
  sgd.step();
  nn::Adam other({w}, 0.1);
  EXPECT_THROW(other.load_state(sgd.state()), ValueError);
  nn::SGD sgd2({w}, 0.3, {.momentum = 0.9});
  sgd2.load_state(sgd.state());
  EXPECT_DOUBLE_EQ(sgd2.lr(), 0.1);
}

TEST(OptimizerState, FollowsParametersConvertedToAnotherDtype) {
  Tensor p = param({1, 2}, "p");
  nn::Adam adam({p}, 0.1);
  p.set_grad(full_like(p, 1.0f));
  adam.step();
  p.set_data(p.detach().to(DType::Float64));  // what Module::to(DType::Float64) does
  p.set_grad(full_like(p, 1.0));
  test::expect_throw_message<DTypeError>(
      [&] { adam.step(); }, "[adam] state 'p.m' is float32 but its parameter is float64");
  adam.match_param_dtypes();
  adam.step();
  EXPECT_EQ(adam.state()[0].second.dtype(), DType::Float64);
  EXPECT_EQ(adam.iterations(), 2);
  // The update op itself names the dtype, not the shape.
  const Tensor w = zeros({2}, DType::Float64), m = zeros({2}, DType::Float32);
  test::expect_throw_message<DTypeError>(
      [&] {
        sgd_update({&w, 1}, {&m, 1}, {&w, 1}, full({}, 0.1, DType::Float64),
                   SgdAttrs{0.9, 0, false});
      },
      "does not match the dtype of parameter 0");
}

}  // namespace
}  // namespace encore
