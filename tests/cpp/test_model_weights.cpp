// Keras' class_weight / sample_weight, count metrics (precision, recall, AUC) and
// steps_per_epoch from C++ (the Python suite checks the same against NumPy references).
#include "helpers.h"
#include "nn/layers.h"
#include "train/model.h"

namespace encore {
namespace {

using test::bitwise_equal;

std::shared_ptr<nn::Sequential> make_net() {
  manual_seed(3);
  auto net = std::make_shared<nn::Sequential>();
  net->add<nn::Dense>(1, nn::DenseOptions{.activation = "sigmoid"});
  net->build({1, 4});
  return net;
}

struct Data {
  Tensor x, y;
};

Data make_data(int64_t n) {
  Generator g(7);
  const Tensor x = uniform({n, 4}, -1, 1, DType::Float32, Device::cpu(), &g);
  return {x, gt(x.slice(1, 0, 1) - x.slice(1, 2, 3), 0.0)};
}

TEST(ModelWeights, ClassWeightEqualsItsSampleWeightsInBothModes) {
  const Data d = make_data(40);
  const std::vector<float> labels = d.y.to_vector<float>();
  std::vector<float> w;
  for (float l : labels) w.push_back(l > 0.5f ? 3.0f : 0.5f);
  std::vector<std::vector<Tensor>> results;
  for (nn::ExecutionMode mode : {nn::ExecutionMode::Eager, nn::ExecutionMode::Traced}) {
    for (int by_class = 0; by_class < 2; ++by_class) {
      auto net = make_net();
      nn::Model model(net);
      model.compile("sgd", "binary_crossentropy", {.mode = mode});
      nn::FitOptions o{.batch_size = 16, .epochs = 2, .verbose = 0};
      if (by_class)
        o.class_weight = {{0, 0.5}, {1, 3.0}};
      else
        o.sample_weight = from_vector(w, {40});
      model.fit(d.x, d.y, o);
      results.push_back(net->parameters());
    }
  }
  for (size_t i = 1; i < results.size(); ++i)
    for (size_t j = 0; j < results[0].size(); ++j)
      EXPECT_TRUE(bitwise_equal(results[0][j], results[i][j]));
}

TEST(ModelWeights, WeightedEvaluateAndCountMetricsAgainstHostReferences) {
  const Data d = make_data(30);
  auto net = make_net();
  nn::Model model(net);
  model.compile(
      "sgd", "binary_crossentropy",
      {.metrics = {nn::Metric::precision(), nn::Metric::recall(0.3), nn::Metric::auc(20)}});
  std::vector<float> w(30);
  for (int i = 0; i < 30; ++i) w[i] = 0.1f * static_cast<float>(i);
  const nn::Logs logs = model.evaluate(d.x, d.y, 30, 0, from_vector(w, {30}));
  const std::vector<float> p = model.predict(d.x).to_vector<float>(), y = d.y.to_vector<float>();
  double loss = 0, tp5 = 0, pp5 = 0, tp3 = 0, pos = 0;
  for (int i = 0; i < 30; ++i) {
    const double q = std::clamp<double>(p[i], 1e-7, 1 - 1e-7);
    loss += -(y[i] * std::log(q) + (1 - y[i]) * std::log(1 - q)) * w[i] / 30;
    tp5 += p[i] > 0.5f && y[i] > 0.5f;
    pp5 += p[i] > 0.5f;
    tp3 += p[i] > 0.3f && y[i] > 0.5f;
    pos += y[i] > 0.5f;
  }
  EXPECT_NEAR(logs.at("loss"), loss, 1e-5);
  EXPECT_DOUBLE_EQ(logs.at("precision"), tp5 / pp5);
  EXPECT_DOUBLE_EQ(logs.at("recall"), tp3 / pos);
  // Keras' AUC: thresholds -1e-7, i / 19, 1 + 1e-7; the interpolated Riemann sum of the ROC curve.
  std::vector<double> tpr(20), fpr(20);
  for (int i = 0; i < 20; ++i) {
    const float t = static_cast<float>(i == 0 ? -1e-7 : i == 19 ? 1 + 1e-7 : i / 19.0);
    double tp = 0, fp = 0;
    for (int r = 0; r < 30; ++r) {
      tp += p[r] > t && y[r] > 0.5f;
      fp += p[r] > t && y[r] < 0.5f;
    }
    tpr[i] = tp / pos;
    fpr[i] = fp / (30 - pos);
  }
  double auc = 0;
  for (int i = 0; i + 1 < 20; ++i) auc += (fpr[i] - fpr[i + 1]) * (tpr[i] + tpr[i + 1]) / 2;
  EXPECT_NEAR(logs.at("auc"), auc, 1e-12);
  nn::Model custom(make_net());
  custom.compile("sgd",
                 nn::Loss("mean", [](const Tensor& t, const Tensor& q) { return mean(q - t); }));
  EXPECT_THROW(custom.evaluate(d.x, d.y, 30, 0, from_vector(w, {30})), ValueError);
}

// A data set that can be read once.
class Once : public nn::Dataset {
 public:
  explicit Once(nn::ArrayDataset data) : data_(std::move(data)) { data_.start(0); }
  void start(int) override {}
  std::optional<nn::Batch> next() override { return data_.next(); }
  int64_t size() const override { return -1; }

 private:
  nn::ArrayDataset data_;
};

TEST(ModelWeights, StepsPerEpochGoesOnAcrossEpochsAndStopsWhenDataRunsOut) {
  const Data d = make_data(40);
  nn::Model model(make_net());
  model.compile("sgd", "mse");
  nn::ArrayDataset again(d.x, d.y, 10);  // 4 batches a pass, started again when it ends
  nn::History h = model.fit(again, {.epochs = 3, .steps_per_epoch = 3, .verbose = 0});
  EXPECT_EQ(model.iterations(), 9);
  EXPECT_TRUE(h.warning.empty());
  Once once(nn::ArrayDataset(d.x, d.y, 10));
  h = model.fit(once, {.epochs = 5, .steps_per_epoch = 3, .verbose = 0});
  EXPECT_EQ(model.iterations(), 13);
  EXPECT_EQ(h.epoch.size(), 2u);
  EXPECT_NE(h.warning.find("ran out after 1 of 3 steps of epoch 2"), std::string::npos)
      << h.warning;
}

}  // namespace
}  // namespace encore
