// Layers, initializers, losses, optimizers, and a short training run.
#include "core/modes.h"
#include "helpers.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "nn/losses.h"
#include "nn/lstm.h"
#include "nn/optim.h"

namespace encore {
namespace {

using test::check_parameter_gradients;
using test::expect_values;
using test::max_abs_diff;
using test::rand64;

TEST(Layers, ShapesAndParameterNames) {
  manual_seed(0);
  nn::Sequential model;
  model.add<nn::Conv1D>(128, 40, nn::Conv1DOptions{.strides = 4, .padding = "same"});
  model.add<nn::GlobalAveragePooling1D>();
  model.add<nn::Dropout>(0.5);
  model.add<nn::Dense>(64, nn::DenseOptions{.activation = "relu"});
  model.add<nn::Dense>(1, nn::DenseOptions{.activation = "sigmoid"});
  EXPECT_EQ(model.build({32, 140, 30}), (Shape{32, 1}));
  std::vector<std::string> names;
  for (auto& [n, t] : model.named_parameters()) {
    names.push_back(n);
    EXPECT_EQ(t.name(), n);
    EXPECT_TRUE(t.requires_grad());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"conv1d.kernel", "conv1d.bias", "dense.kernel",
                                             "dense.bias", "dense_1.kernel", "dense_1.bias"}));
  EXPECT_EQ(model.num_parameters(), 40 * 30 * 128 + 128 + 128 * 64 + 64 + 64 + 1);
  EXPECT_EQ(model(zeros({32, 140, 30})).shape(), (Shape{32, 1}));
  const std::string summary = model.summary({32, 140, 30});
  EXPECT_NE(summary.find("conv1d (conv1d)"), std::string::npos);
  EXPECT_NE(summary.find("(None, 35, 128)"), std::string::npos);
}

TEST(Layers, FlattenAndPooling) {
  const Tensor x = arange(0, 24, 1, DType::Float32).reshape({2, 3, 4});
  nn::Flatten flatten;
  EXPECT_EQ(flatten(x).shape(), (Shape{2, 12}));
  nn::GlobalAveragePooling1D gap;
  expect_values(gap(x).slice(0, 0, 1).reshape({4}), {4, 5, 6, 7});
  nn::GlobalMaxPooling1D gmp;
  expect_values(gmp(x).slice(0, 1, 2).reshape({4}), {20, 21, 22, 23});
}

TEST(Layers, DenseAndConvGradients) {
  manual_seed(1);
  nn::Dense dense(3, {.activation = "tanh"});
  check_parameter_gradients(dense, rand64({2, 4, 5}));
  nn::Conv1D conv(2, 3, {.strides = 2, .padding = "same", .activation = "sigmoid"});
  check_parameter_gradients(conv, rand64({2, 7, 3}));
}

TEST(Layers, LstmGradientsAllOptions) {
  manual_seed(2);
  nn::LSTM a(3, {.return_sequences = true});
  check_parameter_gradients(a, rand64({2, 4, 2}));
  nn::LSTM b(2, {.activation = "relu", .recurrent_activation = "hard_sigmoid", .reverse = true});
  check_parameter_gradients(b, rand64({2, 3, 2}, 5));
  nn::Bidirectional bi(std::make_shared<nn::LSTM>(2, nn::LSTMOptions{.return_sequences = true}));
  check_parameter_gradients(bi, rand64({1, 3, 2}, 6));
}

TEST(Layers, LstmMatchesTheKerasEquations) {
  manual_seed(3);
  nn::LSTM lstm(3, {.return_sequences = true});
  const Tensor x = rand64({2, 5, 4}).to(DType::Float32);
  const Tensor y = lstm(x);
  ASSERT_EQ(y.shape(), (Shape{2, 5, 3}));
  const auto params = lstm.named_parameters();
  const Tensor W = params[0].second, R = params[1].second, b = params[2].second;
  EXPECT_EQ(params[1].first, "recurrent_kernel");
  expect_values(b.slice(0, 3, 6), {1, 1, 1});  // unit forget bias
  Tensor h = zeros({2, 3}), c = zeros({2, 3});
  NoGradGuard no_grad;
  for (int64_t t = 0; t < 5; ++t) {
    const Tensor z = matmul(x.slice(1, t, t + 1).squeeze(1), W) + matmul(h, R) + b;
    const Tensor i = sigmoid(z.slice(1, 0, 3)), f = sigmoid(z.slice(1, 3, 6)),
                 g = tanh(z.slice(1, 6, 9)), o = sigmoid(z.slice(1, 9, 12));
    c = f * c + i * g;
    h = o * tanh(c);
    EXPECT_LT(max_abs_diff(y.slice(1, t, t + 1).squeeze(1), h), 1e-6) << "step " << t;
  }
  // The last state without return_sequences; a reversed LSTM equals the forward one on the
  // flipped sequence, with outputs aligned to the input steps.
  nn::LSTM rev(3, {.return_sequences = true, .reverse = true});
  rev.build(x.shape());
  for (size_t k = 0; k < 3; ++k) rev.parameters()[k].copy_(lstm.parameters()[k]);
  EXPECT_LT(max_abs_diff(rev(x), flip(lstm(flip(x, 1)), 1)), 1e-6);
}

TEST(Layers, BidirectionalMergeModes) {
  manual_seed(4);
  auto inner = std::make_shared<nn::LSTM>(4);
  nn::Bidirectional bi(inner);
  const Tensor x = rand64({3, 6, 2}).to(DType::Float32);
  const Tensor y = bi(x);
  EXPECT_EQ(y.shape(), (Shape{3, 8}));
  EXPECT_LT(max_abs_diff(y.slice(1, 0, 4), (*inner)(x)), 1e-6);
  const auto names = bi.named_parameters();
  EXPECT_EQ(names[0].first, "forward_lstm.kernel");
  EXPECT_EQ(names[3].first, "backward_lstm.kernel");
  nn::Bidirectional sum_bi(std::make_shared<nn::LSTM>(4), {.merge_mode = "sum"});
  EXPECT_EQ(sum_bi(x).shape(), (Shape{3, 4}));
  EXPECT_THROW(nn::Bidirectional(std::make_shared<nn::LSTM>(4), {.merge_mode = "max"}), ValueError);
}

TEST(Init, GlorotAndOrthogonal) {
  manual_seed(5);
  const Tensor g = nn::init::glorot_uniform({100, 50}, 100, 50);
  const double limit = std::sqrt(6.0 / 150);
  EXPECT_LE(max(abs(g)).item(), limit);
  EXPECT_GT(max(abs(g)).item(), 0.9 * limit);
  for (auto [r, c] : {std::pair{4, 16}, std::pair{16, 4}, std::pair{8, 8}}) {
    const Tensor q = nn::init::orthogonal(r, c).to(DType::Float64);
    const Tensor gram = r <= c ? matmul(q, q.transpose(0, 1)) : matmul(q.transpose(0, 1), q);
    const int64_t n = std::min(r, c);
    std::vector<double> eye(n * n, 0.0);
    for (int64_t i = 0; i < n; ++i) eye[i * n + i] = 1.0;
    EXPECT_LT(max_abs_diff(gram, from_vector(eye, {n, n})), 1e-5) << r << "x" << c;
  }
}

TEST(Losses, ValuesAgainstHandComputed) {
  const Tensor y = from_vector<double>({1, 0, 1}, {3}),
               p = from_vector<double>({0.9, 0.2, 0.6}, {3});
  const double bce = -(std::log(0.9) + std::log(0.8) + std::log(0.6)) / 3;
  EXPECT_NEAR(nn::binary_crossentropy(y, p).item(), bce, 1e-12);
  const Tensor logits = log(p) - log(1.0 - p);
  EXPECT_NEAR(nn::binary_crossentropy(y, logits, true).item(), bce, 1e-12);
  // Clipping keeps saturated probabilities finite, as in Keras.
  EXPECT_TRUE(
      std::isfinite(nn::binary_crossentropy(y, from_vector<double>({1, 0, 0}, {3})).item()));
  EXPECT_NEAR(nn::mean_squared_error(y, p).item(), (0.01 + 0.04 + 0.16) / 3, 1e-12);
  const Tensor scores = from_vector<double>({2, 1, 0, 0, 0, 3}, {2, 3});
  const Tensor labels = from_vector<int64_t>({0, 2}, {2});
  const double lse0 = std::log(std::exp(2) + std::exp(1) + 1), lse1 = std::log(2 + std::exp(3));
  EXPECT_NEAR(nn::sparse_categorical_crossentropy(labels, scores, true).item(),
              ((lse0 - 2) + (lse1 - 3)) / 2, 1e-12);
  EXPECT_NEAR(nn::binary_accuracy(y, p), 1.0, 1e-12);
  EXPECT_THROW(nn::mean_squared_error(y, zeros({2})), ShapeError);
}

// softplus(z) - z * y, in float64 on the host, without cancellation: the stable reference.
double stable_bce(double z, double y) {
  return std::max(z, 0.0) + std::log1p(std::exp(-std::fabs(z))) - z * y;
}

TEST(Losses, BinaryCrossentropyOfASigmoidUsesTheLogits) {
  // Saturated outputs keep their loss and gradient (Keras 3 does the same); others agree with
  // the probability formula.
  const std::vector<double> zs = {20, -20, 40, 0.3, -1.5}, ys = {0, 1, 0, 1, 0};
  for (DType dt : {DType::Float32, DType::Float64}) {
    const Tensor z = from_vector<double>(zs, {5}).to(dt).set_requires_grad();
    const Tensor y = from_vector<double>(ys, {5}).to(dt);
    const Tensor loss = nn::binary_crossentropy(y, sigmoid(z));
    double expected = 0;
    for (size_t i = 0; i < zs.size(); ++i) expected += stable_bce(zs[i], ys[i]) / zs.size();
    EXPECT_NEAR(loss.item(), expected, 1e-5 * expected);
    loss.backward();
    std::vector<double> grad;  // (sigmoid(z) - y) / n
    for (size_t i = 0; i < zs.size(); ++i) grad.push_back((1 / (1 + std::exp(-zs[i])) - ys[i]) / 5);
    expect_values(z.grad(), grad, dt == DType::Float32 ? 1e-7 : 1e-12);
  }
  // BCE(0, sigmoid(20)): loss 20 and gradient 1, where clipping gives 16.1 and 0.
  const Tensor z = full({1}, 20.0).set_requires_grad();
  const Tensor loss = nn::binary_crossentropy(zeros({1}), sigmoid(z));
  EXPECT_NEAR(loss.item(), 20.0, 1e-5);
  loss.backward();
  expect_values(z.grad(), {1.0});

  // Layers with a sigmoid activation too.
  manual_seed(9);
  nn::Dense dense(1, {.activation = "sigmoid"});
  const Tensor x = rand64({4, 3}), y = from_vector<double>({1, 0, 1, 0}, {4, 1});
  dense.build(x.shape());
  dense.to(DType::Float64);
  const Tensor logits = matmul(x, dense.parameters()[0]) + dense.parameters()[1];
  EXPECT_NEAR(nn::binary_crossentropy(y, dense(x)).item(),
              nn::binary_crossentropy(y, logits, /*from_logits=*/true).item(), 1e-15);
}

TEST(Losses, BinaryCrossentropyClipsProbabilitiesChangedSinceTheSigmoid) {
  const Tensor y = zeros({1});
  const double clipped = -std::log(1 - (1 - 1e-7));  // 16.1: log of the clipped probability
  // Written in place after the sigmoid: the logits no longer describe it.
  Tensor p = sigmoid(full({1}, 20.0, DType::Float64));
  EXPECT_NEAR(nn::binary_crossentropy(y.to(DType::Float64), p).item(), stable_bce(20, 0), 1e-12);
  p.fill_(1.0);
  EXPECT_NEAR(nn::binary_crossentropy(y.to(DType::Float64), p).item(), clipped, 1e-6);
  // The logits written in place, or given new storage, after the sigmoid.
  Tensor z = full({1}, 20.0, DType::Float64);
  const Tensor q = sigmoid(z);
  z.fill_(0.0);
  EXPECT_NEAR(nn::binary_crossentropy(y.to(DType::Float64), q).item(), clipped, 1e-6);
  Tensor w = full({1}, 20.0, DType::Float64);
  const Tensor r = sigmoid(w);
  w.set_data(zeros({1}, DType::Float64));
  EXPECT_NEAR(nn::binary_crossentropy(y.to(DType::Float64), r).item(), clipped, 1e-6);
  // A copy or a view is not the sigmoid's output.
  const Tensor s = sigmoid(full({1, 1}, 20.0, DType::Float64));
  EXPECT_NEAR(nn::binary_crossentropy(y.to(DType::Float64), s.reshape({1})).item(), clipped, 1e-6);
  EXPECT_NEAR(nn::binary_crossentropy(y.to(DType::Float64), s.clone().reshape({1})).item(), clipped,
              1e-6);
  // Probabilities made without gradient tracking give a loss that tracks nothing.
  const Tensor zg = full({1}, 20.0).set_requires_grad();
  Tensor pg;
  {
    NoGradGuard no_grad;
    pg = sigmoid(zg);
  }
  const Tensor untracked = nn::binary_crossentropy(y, pg);
  EXPECT_FALSE(untracked.requires_grad());
  EXPECT_NEAR(untracked.item(), 20.0, 1e-5);
  // ... and a leaf the caller asked gradients for keeps its own (the clipped formula's).
  pg.set_requires_grad();
  const Tensor own = nn::binary_crossentropy(y, pg);
  own.backward();
  EXPECT_TRUE(pg.grad().defined());
  EXPECT_FALSE(zg.grad().defined());
}

TEST(Optimizers, SgdMomentumNesterovAgainstHandComputed) {
  for (auto [momentum, nesterov] :
       {std::pair{0.0, false}, std::pair{0.9, false}, std::pair{0.9, true}}) {
    Tensor p = from_vector<float>({1, 2}, {2}).set_requires_grad();
    nn::SGD sgd({p}, 0.1, {.momentum = momentum, .nesterov = nesterov, .weight_decay = 0.01});
    double w[2] = {1, 2}, buf[2] = {0, 0};
    const double g0[2] = {0.5, -1};
    for (int step = 0; step < 3; ++step) {
      p.set_grad(from_vector<float>({0.5f, -1.0f}, {2}));
      sgd.step();
      for (int i = 0; i < 2; ++i) {
        double g = g0[i] + 0.01 * w[i];
        if (momentum > 0) {
          buf[i] = momentum * buf[i] + g;
          g = nesterov ? g + momentum * buf[i] : buf[i];
        }
        w[i] -= 0.1 * g;
      }
      expect_values(p, {w[0], w[1]}, 1e-6);
    }
  }
}

TEST(Optimizers, AdamAgainstHandComputedAndLearningRateChange) {
  Tensor p = from_vector<float>({1, -2}, {2}).set_requires_grad();
  nn::Adam adam({p}, 0.1);
  double w[2] = {1, -2}, m[2] = {0, 0}, v[2] = {0, 0}, lr = 0.1;
  const double g[2] = {0.5, 0.25};
  for (int t = 1; t <= 4; ++t) {
    if (t == 3) {
      adam.set_lr(0.05);
      lr = 0.05;
    }
    p.set_grad(from_vector<float>({0.5f, 0.25f}, {2}));
    adam.step();
    for (int i = 0; i < 2; ++i) {
      m[i] = 0.9 * m[i] + 0.1 * g[i];
      v[i] = 0.999 * v[i] + 0.001 * g[i] * g[i];
      const double mhat_scale = lr / (1 - std::pow(0.9, t));
      w[i] -= mhat_scale * m[i] / (std::sqrt(v[i]) / std::sqrt(1 - std::pow(0.999, t)) + 1e-7);
    }
    expect_values(p, {w[0], w[1]}, 1e-6);
  }
  EXPECT_EQ(adam.iterations(), 4);
  EXPECT_EQ(adam.state().size(), 4u);  // m, v, lr, step
}

TEST(Optimizers, ZeroGradAndValidation) {
  Tensor p = ones({2}).set_requires_grad();
  nn::SGD sgd({p}, 0.1);
  sum(p * 2.0).backward();
  sgd.zero_grad(false);
  expect_values(p.grad(), {0, 0});
  sgd.zero_grad();
  EXPECT_FALSE(p.grad().defined());
  sgd.step();  // no gradients: nothing to do
  expect_values(p, {1, 1});
  EXPECT_THROW(nn::Adam({}, 0.1), ValueError);
  EXPECT_THROW(nn::SGD({p}, -1.0), ValueError);
}

TEST(Training, DenseModelLossFalls) {
  manual_seed(7);
  Generator data(11);
  const Tensor x = uniform({256, 4}, -1, 1, DType::Float32, Device::cpu(), &data);
  const Tensor y = gt(x.slice(1, 0, 1) + x.slice(1, 1, 2), 0.0);  // (256, 1) labels
  nn::Sequential model;
  model.add<nn::Dense>(16, nn::DenseOptions{.activation = "relu"});
  model.add<nn::Dense>(1, nn::DenseOptions{.activation = "sigmoid"});
  model.build(x.shape());
  nn::Adam adam(model.parameters(), 0.05);
  double first = 0, last = 0;
  for (int step = 0; step < 150; ++step) {
    adam.zero_grad();
    const Tensor loss = nn::binary_crossentropy(y, model(x));
    loss.backward();
    adam.step();
    (step == 0 ? first : last) = loss.item();
  }
  EXPECT_LT(last, first * 0.3);
  TrainingGuard eval(false);
  EXPECT_GT(nn::binary_accuracy(y, model(x)), 0.95);
}

}  // namespace
}  // namespace encore
