// nn::Model (compile / fit / evaluate / predict), its callbacks, schedules, the batching helper
// and checkpoints that resume exactly.
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "core/modes.h"
#include "helpers.h"
#include "nn/layers.h"
#include "nn/losses.h"
#include "nn/resume.h"
#include "train/model.h"

namespace encore {
namespace {

using test::bitwise_equal;

struct Data {
  Tensor x, y;
};

// Label 1 when x0 + x1 > 0.
Data make_data(int64_t n, uint64_t seed) {
  Generator g(seed);
  const Tensor x = uniform({n, 4}, -1, 1, DType::Float32, Device::cpu(), &g);
  return {x, gt(x.slice(1, 0, 1) + x.slice(1, 1, 2), 0.0)};
}

std::shared_ptr<nn::Sequential> make_net(uint64_t seed = 1) {
  manual_seed(seed);
  auto net = std::make_shared<nn::Sequential>();
  net->add<nn::Dense>(8, nn::DenseOptions{.activation = "relu"});
  net->add<nn::Dropout>(0.25);
  net->add<nn::Dense>(1, nn::DenseOptions{.activation = "sigmoid"});
  net->build({1, 4});
  return net;
}

std::unique_ptr<nn::Model> make_model(nn::ExecutionMode mode, uint64_t seed = 1) {
  auto net = make_net(seed);
  auto model = std::make_unique<nn::Model>(net);
  model->compile(std::make_shared<nn::Adam>(net->parameters(), 0.02), "binary_crossentropy",
                 {.metrics = {"accuracy"}, .mode = mode});
  return model;
}

std::vector<Tensor> params_of(nn::Model& m) {
  std::vector<Tensor> out;
  for (const Tensor& p : m.module().parameters()) out.push_back(p.detach().clone());
  return out;
}

void expect_same(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(bitwise_equal(a[i], b[i])) << "tensor " << i;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("encore_model_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

TEST(Model, FitLearnsAndTracedEqualsEagerBitwise) {
  const Data train = make_data(200, 3), val = make_data(50, 4);
  nn::FitOptions o{.batch_size = 32,
                   .epochs = 4,
                   .seed = 7,
                   .validation_data = std::make_shared<nn::ArrayDataset>(val.x, val.y, 32),
                   .verbose = 0};
  // Each run from the same seed (model initialization, dropout masks).
  auto eager = make_model(nn::ExecutionMode::Eager);
  const nn::History he = eager->fit(train.x, train.y, o);
  auto traced = make_model(nn::ExecutionMode::Traced);
  const nn::History ht = traced->fit(train.x, train.y, o);
  EXPECT_EQ(he.history, ht.history);  // every loss, metric and validation value, bit for bit
  expect_same(params_of(*eager), params_of(*traced));
  EXPECT_TRUE(bitwise_equal(eager->predict(val.x), traced->predict(val.x)));
  EXPECT_EQ(ht.epoch, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_LT(ht.history.at("loss").back(), ht.history.at("loss").front());
  EXPECT_GT(ht.history.at("val_accuracy").back(), 0.85);
  EXPECT_EQ(traced->iterations(), 4 * 7);
  EXPECT_EQ(traced->epoch(), 4);
}

// 200 rows in batches of 32: six full batches and one of 8, kept. Each size traces once, in the
// first epoch; later epochs only replay.
TEST(Model, PartialBatchTracesOnceNotEveryEpoch) {
  const Data train = make_data(200, 3), val = make_data(50, 4);
  auto model = make_model(nn::ExecutionMode::Traced);
  const nn::History h =
      model->fit(train.x, train.y,
                 {.batch_size = 32,
                  .epochs = 5,
                  .validation_data = std::make_shared<nn::ArrayDataset>(val.x, val.y, 32),
                  .verbose = 0});
  EXPECT_EQ(model->train_function()->stats().traces, 2);
  EXPECT_EQ(model->train_function()->stats().calls, 5 * 7);
  EXPECT_EQ(model->test_function()->stats().traces, 2);  // 32 and 18 rows
  EXPECT_NE(h.cost.find("4 traces"), std::string::npos) << h.cost;
  EXPECT_NE(h.cost.find("train_step call 7: new signature: arg 0 (x): shape (32, 4) -> (8, 4)"),
            std::string::npos)
      << h.cost;
  // A second fit adds no trace.
  const nn::History again =
      model->fit(train.x, train.y, {.batch_size = 32, .epochs = 2, .verbose = 0});
  EXPECT_EQ(model->train_function()->stats().traces, 2);
  EXPECT_NE(again.cost.find("cost (traced): 0 traces, 14 replays"), std::string::npos)
      << again.cost;
}

TEST(Model, EvaluateAndPredictRunInInferenceMode) {
  const Data d = make_data(70, 5);
  auto model = make_model(nn::ExecutionMode::Traced);
  model->fit(d.x, d.y, {.epochs = 1, .verbose = 0});
  EXPECT_TRUE(model->module().is_training());  // fit gives the module its mode back
  const nn::Logs a = model->evaluate(d.x, d.y), b = model->evaluate(d.x, d.y);
  EXPECT_EQ(a, b);  // no dropout
  const Tensor p = model->predict(d.x, 32);
  Tensor reference;
  {
    TrainingGuard inference(false);
    NoGradGuard no_grad;
    reference = model->module()(d.x);
  }
  // Batched predictions are row by row what one forward over everything gives.
  EXPECT_LE(test::max_abs_diff(reference, p), 1e-6);
  EXPECT_FALSE(p.requires_grad());
  EXPECT_EQ(model->predict_function()->stats().traces, 2);  // 32 rows and 6
  EXPECT_NEAR(a.at("loss"), nn::binary_crossentropy(d.y, reference).item(), 1e-6);
  EXPECT_NEAR(a.at("accuracy"), nn::binary_accuracy(d.y, reference), 1e-6);
}

TEST(Model, OnBatchMethods) {
  const Data d = make_data(16, 6);
  struct Run {
    std::vector<nn::Logs> logs;
    Tensor prediction;
    std::vector<Tensor> params;
  };
  auto run = [&](nn::ExecutionMode mode) {
    auto model = make_model(mode);
    Run r;
    for (int i = 0; i < 3; ++i) r.logs.push_back(model->train_on_batch(d.x, d.y));
    EXPECT_EQ(model->iterations(), 3);
    r.logs.push_back(model->test_on_batch(d.x, d.y));
    r.prediction = model->predict_on_batch(d.x);
    r.params = params_of(*model);
    if (mode == nn::ExecutionMode::Traced) {
      EXPECT_EQ(model->train_function()->stats().traces, 1);
    }
    return r;
  };
  const Run eager = run(nn::ExecutionMode::Eager), traced = run(nn::ExecutionMode::Traced);
  EXPECT_EQ(eager.logs, traced.logs);
  EXPECT_TRUE(bitwise_equal(eager.prediction, traced.prediction));
  expect_same(eager.params, traced.params);
}

TEST(Model, NamedOptimizerAndLazyBuild) {
  const Data d = make_data(64, 7);
  auto net = std::make_shared<nn::Sequential>();
  net->add<nn::Dense>(1);
  nn::Model model(net);
  model.compile("rmsprop", "mse", {.metrics = {"mae"}});
  EXPECT_EQ(model.optimizer(), nullptr);
  const nn::History h = model.fit(d.x, d.y, {.epochs = 2, .verbose = 0});
  ASSERT_NE(model.optimizer(), nullptr);
  EXPECT_STREQ(model.optimizer()->kind(), "rmsprop");
  EXPECT_EQ(h.history.at("mae").size(), 2u);
  EXPECT_EQ(model.log_names(), (std::vector<std::string>{"loss", "mae"}));
}

TEST(Model, Errors) {
  const Data d = make_data(8, 1);
  auto net = make_net();
  nn::Model model(net);
  EXPECT_THROW(model.fit(d.x, d.y), ValueError);  // not compiled
  EXPECT_THROW(model.compile("adam", "hinge"), ValueError);
  EXPECT_THROW(model.compile("adagrad", "mse"), ValueError);
  EXPECT_THROW(model.compile("adam", "mse", {.metrics = {"accuracy"}}), ValueError);
  EXPECT_THROW(model.compile("adam", "mse", {.metrics = {"mae", "mae"}}), ValueError);
  model.compile("adam", "mse");
  EXPECT_THROW(model.fit(d.x, d.y.slice(0, 0, 4)), ShapeError);
  EXPECT_THROW(model.fit(d.x, d.y, {.validation_split = 1.5}), ValueError);
  EXPECT_THROW(model.fit(d.x, d.y, {.epochs = -1, .verbose = 0}), ValueError);
  // A loss per row (Keras' form) is averaged over the rows.
  model.compile("adam",
                nn::Loss("per_row", [](const Tensor& y, const Tensor& p) { return p - y; }));
  const double per_row = model.test_on_batch(d.x, d.y).at("loss");
  EXPECT_NEAR(per_row, mean(model.predict(d.x) - d.y).item(), 1e-6);
}

TEST(Model, ProgressBarAndCostSummary) {
  const Data d = make_data(100, 2);
  auto model = make_model(nn::ExecutionMode::Traced);
  std::string out;
  model->set_output([&](const std::string& s) { out += s; }, false);
  model->fit(d.x, d.y, {.batch_size = 50, .epochs = 2, .validation_split = 0.2, .verbose = 1});
  EXPECT_NE(out.find("Epoch 1/2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("Epoch 2/2\n"), std::string::npos) << out;
  // Non-interactive: only the final line of each epoch, with the validation values.
  EXPECT_NE(out.find("2/2 [==============================] "), std::string::npos) << out;
  EXPECT_NE(out.find("/step - loss: "), std::string::npos) << out;
  EXPECT_NE(out.find(" - accuracy: "), std::string::npos) << out;
  EXPECT_NE(out.find(" - val_loss: "), std::string::npos) << out;
  EXPECT_EQ(out.find('\r'), std::string::npos);
  EXPECT_NE(out.find("cost (traced): 3 traces (train_step call 1: first call; "), std::string::npos)
      << out;
  EXPECT_NE(out.find(" replays; tracing "), std::string::npos) << out;

  out.clear();
  model->fit(d.x, d.y, {.batch_size = 50, .epochs = 1, .verbose = 2});
  EXPECT_EQ(out.substr(0, 12), "Epoch 1/1 - ") << out;
  EXPECT_NE(out.find("/step - loss: "), std::string::npos) << out;
  out.clear();
  auto eager = make_model(nn::ExecutionMode::Eager);
  eager->set_output([&](const std::string& s) { out += s; }, false);
  eager->fit(d.x, d.y, {.batch_size = 50, .epochs = 1, .verbose = 2});
  EXPECT_NE(out.find("cost (eager): 2 training steps, "), std::string::npos) << out;
}

TEST(Model, InteractiveBarRedrawsInPlace) {
  std::string out;
  nn::ProgressBar captured(
      1, [&](const std::string& s) { out += s; }, true);
  captured.start(4, "Epoch 1/1", {"loss"});
  usleep(120000);
  captured.update(1, [] { return nn::Logs{{"loss", 0.5}}; });
  captured.finish(4, {{"loss", 0.25}, {"lr", 0.1}});
  EXPECT_NE(out.find("\r1/4 [======>.......................] "), std::string::npos) << out;
  EXPECT_NE(out.find(", ETA "), std::string::npos) << out;
  EXPECT_NE(out.find("- loss: 0.5000"), std::string::npos) << out;
  EXPECT_NE(out.find("\r4/4 [==============================] "), std::string::npos) << out;
  EXPECT_NE(out.find("- loss: 0.2500 - lr: 0.1000\n"), std::string::npos) << out;
}

TEST(Model, EarlyStoppingStopsAndRestoresBestWeights) {
  const Data d = make_data(64, 8);
  auto model = make_model(nn::ExecutionMode::Traced);
  // A learning rate this large makes the loss bounce: the best epoch is an early one.
  model->optimizer()->set_lr(5.0);
  auto stop = std::make_shared<nn::EarlyStopping>(
      nn::EarlyStoppingOptions{.monitor = "loss", .patience = 1, .restore_best_weights = true});
  struct Snapshots : nn::Callback {
    std::vector<std::vector<Tensor>> params;
    std::vector<double> losses;
    void on_epoch_end(nn::Model& m, int, nn::Logs& logs) override {
      params.push_back(params_of(m));
      losses.push_back(logs.at("loss"));
    }
  };
  auto snaps = std::make_shared<Snapshots>();
  const nn::History h = model->fit(
      d.x, d.y, {.batch_size = 16, .epochs = 30, .callbacks = {snaps, stop}, .verbose = 0});
  ASSERT_GE(stop->stopped_epoch(), 1);
  EXPECT_EQ(static_cast<int>(h.epoch.size()), stop->stopped_epoch() + 1);
  const auto best =
      std::min_element(snaps->losses.begin(), snaps->losses.end()) - snaps->losses.begin();
  EXPECT_DOUBLE_EQ(stop->best(), snaps->losses[best]);
  expect_same(params_of(*model), snaps->params[best]);

  auto bad = std::make_shared<nn::EarlyStopping>();  // val_loss without validation data
  EXPECT_THROW(model->fit(d.x, d.y, {.epochs = 1, .callbacks = {bad}, .verbose = 0}), ValueError);
}

TEST(Model, LearningRateScheduleFollowsTheFormulaWithoutRetracing) {
  const Data d = make_data(40, 9);
  const nn::Schedule schedule =
      nn::Schedule::warmup(nn::Schedule::cosine_decay(0.05, 20, 0.1), 3, 0.01);
  struct Rates : nn::Callback {
    std::vector<double> seen;
    bool wants_batches() const override { return true; }
    void on_batch_begin(nn::Model& m, int64_t) override { seen.push_back(m.optimizer()->lr()); }
  };
  auto run = [&](nn::ExecutionMode mode) {
    auto model = make_model(mode);
    auto rates = std::make_shared<Rates>();
    const auto sched = std::make_shared<nn::LearningRateScheduler>(schedule);
    // The scheduler first: the recorder sees the rate of the step about to run.
    const nn::History h = model->fit(
        d.x, d.y, {.batch_size = 8, .epochs = 5, .callbacks = {sched, rates}, .verbose = 0});
    if (mode == nn::ExecutionMode::Traced) {
      EXPECT_EQ(model->train_function()->stats().traces, 1);
    }
    EXPECT_EQ(h.history.at("lr").back(), schedule(24));
    return std::make_pair(rates->seen, params_of(*model));
  };
  const auto [eager_rates, eager_params] = run(nn::ExecutionMode::Eager);
  const auto [traced_rates, traced_params] = run(nn::ExecutionMode::Traced);
  ASSERT_EQ(traced_rates.size(), 25u);
  for (int64_t s = 0; s < 25; ++s) EXPECT_EQ(traced_rates[s], schedule(s)) << "step " << s;
  EXPECT_EQ(eager_rates, traced_rates);
  expect_same(eager_params, traced_params);
}

TEST(Schedules, Formulas) {
  const auto step = nn::Schedule::step_decay(0.1, 3, 0.5);
  EXPECT_EQ(step(0), 0.1);
  EXPECT_EQ(step(2), 0.1);
  EXPECT_EQ(step(3), 0.05);
  EXPECT_EQ(step(7), 0.025);
  const auto expo = nn::Schedule::exponential_decay(0.1, 10, 0.5);
  EXPECT_DOUBLE_EQ(expo(5), 0.1 * std::pow(0.5, 0.5));
  EXPECT_DOUBLE_EQ(nn::Schedule::exponential_decay(0.1, 10, 0.5, true)(15), 0.05);
  const auto cosine = nn::Schedule::cosine_decay(1.0, 10, 0.2);
  EXPECT_DOUBLE_EQ(cosine(0), 1.0);
  EXPECT_DOUBLE_EQ(cosine(5), 0.8 * 0.5 + 0.2);
  EXPECT_DOUBLE_EQ(cosine(10), 0.2);
  EXPECT_DOUBLE_EQ(cosine(50), 0.2);
  const auto warm = nn::Schedule::warmup(nn::Schedule::step_decay(0.1, 100, 0.5), 4);
  EXPECT_EQ(warm(0), 0.0);
  EXPECT_DOUBLE_EQ(warm(2), 0.05);
  EXPECT_EQ(warm(4), 0.1);
  EXPECT_NE(warm.str().find("warmup(4 steps"), std::string::npos);
  EXPECT_THROW(nn::Schedule::step_decay(0.1, 0, 0.5), ValueError);
  EXPECT_THROW(step(-1), ValueError);
}

TEST(ArrayDataset, BatchesAndSeededShuffle) {
  const Tensor x = arange(0, 10, 1, DType::Int64).reshape({10, 1}),
               y = arange(0, 10, 1, DType::Int64);
  nn::ArrayDataset in_order(x, y, 4);
  EXPECT_EQ(in_order.size(), 3);
  in_order.start(0);
  std::vector<int64_t> sizes;
  while (auto b = in_order.next()) {
    sizes.push_back(b->x.shape()[0]);
    EXPECT_EQ(b->x.storage(), x.storage());  // views
  }
  EXPECT_EQ(sizes, (std::vector<int64_t>{4, 4, 2}));

  nn::ArrayDataset shuffled(x, y, 4, true, 11), same(x, y, 4, true, 11), other(x, y, 4, true, 12);
  EXPECT_EQ(shuffled.order(3), same.order(3));
  EXPECT_NE(shuffled.order(0), shuffled.order(1));
  EXPECT_NE(shuffled.order(0), other.order(0));
  shuffled.start(2);
  std::vector<int64_t> seen;
  while (auto b = shuffled.next()) {
    const auto xs = b->x.to_vector<int64_t>(), ys = b->y.to_vector<int64_t>();
    EXPECT_EQ(xs, ys);  // rows stay paired
    seen.insert(seen.end(), xs.begin(), xs.end());
  }
  EXPECT_EQ(seen, shuffled.order(2));
  EXPECT_THROW(nn::ArrayDataset(x, y.slice(0, 0, 5), 4), ShapeError);
  EXPECT_THROW(nn::ArrayDataset(x, y, 0), ValueError);
}

// fit for N epochs == fit k, save, load into a fresh model, fit N - k (in this process; the
// Python suite does it across processes). Dropout and shuffling included.
TEST(Checkpoints, ResumeGivesTheUninterruptedRunBitwise) {
  const Data d = make_data(90, 10);
  const std::string path = temp_path("resume.safetensors");
  for (nn::ExecutionMode mode : {nn::ExecutionMode::Eager, nn::ExecutionMode::Traced}) {
    const nn::FitOptions o{.batch_size = 16, .epochs = 5, .seed = 3, .verbose = 0};
    auto whole = make_model(mode);
    const nn::History full = whole->fit(d.x, d.y, o);

    auto first = make_model(mode);
    nn::FitOptions part = o;
    part.epochs = 2;
    first->fit(d.x, d.y, part);
    first->save_checkpoint(path);
    manual_seed(999);  // the checkpoint carries the generator state

    auto resumed = make_model(mode, /*seed=*/5);
    resumed->load_checkpoint(path);
    EXPECT_EQ(resumed->epoch(), 2);
    EXPECT_EQ(resumed->iterations(), 12);
    nn::FitOptions rest = o;
    rest.initial_epoch = resumed->epoch();
    const nn::History tail = resumed->fit(d.x, d.y, rest);
    expect_same(params_of(*whole), params_of(*resumed));
    EXPECT_EQ(tail.history.at("loss"), std::vector<double>(full.history.at("loss").begin() + 2,
                                                           full.history.at("loss").end()));
  }
  std::filesystem::remove(path);
}

TEST(Checkpoints, LoadIsStrictAndChangesNothingOnError) {
  const Data d = make_data(32, 11);
  const std::string path = temp_path("strict.safetensors");
  auto model = make_model(nn::ExecutionMode::Eager);
  model->fit(d.x, d.y, {.epochs = 1, .verbose = 0});
  model->save_checkpoint(path);

  // Another architecture: nothing changes.
  auto net = std::make_shared<nn::Sequential>();
  net->add<nn::Dense>(3);
  net->build({1, 4});
  auto adam = std::make_shared<nn::Adam>(net->parameters(), 0.1);
  nn::Model other(net);
  other.compile(adam, "mse");
  const auto before = params_of(other);
  EXPECT_THROW(other.load_checkpoint(path), ShapeError);
  expect_same(before, params_of(other));
  EXPECT_EQ(adam->state().size(), 2u);  // lr and step: no moments were created

  // Same architecture, another optimizer kind.
  auto sgd_model = make_model(nn::ExecutionMode::Eager);
  sgd_model->compile("sgd", "binary_crossentropy");
  EXPECT_THROW(sgd_model->load_checkpoint(path), ValueError);

  // A truncated file.
  const auto size = std::filesystem::file_size(path);
  std::filesystem::resize_file(path, size - 3);
  auto fresh = make_model(nn::ExecutionMode::Eager, 2);
  const auto fresh_before = params_of(*fresh);
  EXPECT_THROW(fresh->load_checkpoint(path), ValueError);
  expect_same(fresh_before, params_of(*fresh));
  std::filesystem::remove(path);
  EXPECT_THROW(fresh->load_checkpoint(path), FileError);

  // nn::load reads the model part of a checkpoint.
  model->save_checkpoint(path);
  auto reader = make_net(9);
  nn::load(*reader, path);
  for (size_t i = 0; i < reader->parameters().size(); ++i)
    EXPECT_TRUE(bitwise_equal(reader->parameters()[i], model->module().parameters()[i]));
  std::filesystem::remove(path);
}

TEST(Checkpoints, ModelCheckpointCallbackSavesEachEpochOrTheBest) {
  const Data d = make_data(48, 12);
  const std::string pattern = temp_path("epoch{epoch}.safetensors");
  auto model = make_model(nn::ExecutionMode::Traced);
  auto every = std::make_shared<nn::ModelCheckpoint>(
      nn::ModelCheckpointOptions{.path = pattern, .monitor = "loss"});
  model->fit(d.x, d.y, {.batch_size = 16, .epochs = 3, .callbacks = {every}, .verbose = 0});
  for (int e = 1; e <= 3; ++e) {
    const std::string p = temp_path("epoch" + std::to_string(e) + ".safetensors");
    EXPECT_TRUE(std::filesystem::exists(p)) << p;
    std::filesystem::remove(p);
  }
  EXPECT_EQ(every->last_saved(), temp_path("epoch3.safetensors"));
  const std::string best = temp_path("best.safetensors");
  auto only_best = std::make_shared<nn::ModelCheckpoint>(nn::ModelCheckpointOptions{
      .path = best, .monitor = "accuracy", .save_best_only = true, .weights_only = true});
  model->fit(d.x, d.y, {.batch_size = 16, .epochs = 2, .callbacks = {only_best}, .verbose = 0});
  EXPECT_TRUE(std::filesystem::exists(best));
  auto reader = make_net(3);
  nn::load(*reader, best);  // parameters only
  std::filesystem::remove(best);
}

}  // namespace
}  // namespace encore
