// DistributedOptimizer (nn/distributed.h): N ranks with batch B/N each end where one process with
// batch B ends (float64, 20 Adam steps, small Conv1D and BiLSTM models), data-parallel eager and
// traced runs agree bitwise, every rank holds the same bits, and the buckets behave as designed
// (one all-reduce for the tiny Dense model, overlap with the backward, per-bucket updates).
// The reference is the plain one-process step on the whole batch, which uses no collective.
#include <gtest/gtest.h>

#include <cmath>

#include "../cpp/helpers.h"
#include "core/dist.h"
#include "core/ledger.h"
#include "graph/trace.h"
#include "nn/distributed.h"
#include "nn/layers.h"
#include "nn/losses.h"
#include "nn/lstm.h"
#include "nn/optim.h"
#include "nn/recurrent.h"
#include "ops/collective.h"
#include "ops/ops.h"
#include "ops/random.h"
#include "train/model.h"

namespace encore {
namespace {

constexpr int64_t kBatch = 12;  // divisible by 1, 2, 3 and 4 ranks
constexpr int kSteps = 20;

std::shared_ptr<nn::Sequential> conv_model() {
  manual_seed(7);
  auto m = std::make_shared<nn::Sequential>();
  m->add<nn::Conv1D>(4, 3, nn::Conv1DOptions{.activation = "relu"});
  m->add<nn::GlobalAveragePooling1D>();
  m->add<nn::Dense>(1);
  m->build({kBatch, 10, 3});
  m->to(DType::Float64);
  return m;
}

std::shared_ptr<nn::Sequential> bilstm_model() {
  manual_seed(11);
  auto m = std::make_shared<nn::Sequential>();
  m->add<nn::Bidirectional>(std::make_shared<nn::LSTM>(5));
  m->add<nn::Dense>(1);
  m->build({kBatch, 6, 3});
  m->to(DType::Float64);
  return m;
}

struct Data {
  Tensor x, y;
};
Data data(const Shape& x_shape) {
  Generator g(3);
  Data d{uniform(x_shape, -1.0, 1.0, DType::Float64, Device::cpu(), &g),
         uniform({x_shape[0], 1}, -1.0, 1.0, DType::Float64, Device::cpu(), &g)};
  return d;
}

// Trains `model` for kSteps on rows [begin, end) of every batch; traced or eager.
std::vector<Tensor> train(const std::shared_ptr<nn::Sequential>& model, const Data& d,
                          int64_t begin, int64_t end, bool distributed, bool traced,
                          dist::DistributedOptions options = {}) {
  std::shared_ptr<nn::Optimizer> opt = std::make_shared<nn::Adam>(model->parameters(), 0.01);
  if (distributed) opt = dist::DistributedOptimizer(opt, options);
  const Tensor x = d.x.slice(0, begin, end).contiguous(), y = d.y.slice(0, begin, end).contiguous();
  auto body = [&](const Tensor& xb, const Tensor& yb) {
    opt->zero_grad();
    const Tensor loss = nn::mean_squared_error(yb, (*model)(xb));
    loss.backward();
    opt->step();
    return loss;
  };
  auto step = trace(body);
  for (int s = 0; s < kSteps; ++s) {
    if (traced)
      step(x, y);
    else
      body(x, y);
  }
  if (traced) {
    EXPECT_EQ(step.stats().traces, 1);
  }
  std::vector<Tensor> out;
  for (const Tensor& p : model->parameters()) out.push_back(p.clone());
  return out;
}

double max_relative(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const auto x = a[i].to_vector<double>(), y = b[i].to_vector<double>();
    for (size_t k = 0; k < x.size(); ++k)
      worst = std::max(worst, std::fabs(x[k] - y[k]) / std::max(std::fabs(y[k]), 1e-3));
  }
  return worst;
}

bool bitwise(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  for (size_t i = 0; i < a.size(); ++i)
    if (!test::bitwise_equal(a[i], b[i])) return false;
  return true;
}

// Every rank holds the same bits: gather each parameter and compare rank by rank.
void expect_same_on_every_rank(const std::vector<Tensor>& params) {
  for (const Tensor& p : params) {
    const Tensor all = dist::all_gather(p.reshape({1, -1}));
    for (int r = 1; r < dist::size(); ++r)
      EXPECT_TRUE(test::bitwise_equal(all.slice(0, r, r + 1), all.slice(0, 0, 1))) << "rank " << r;
  }
}

void check_exactness(std::shared_ptr<nn::Sequential> (*make)(), const Shape& x_shape) {
  const Data d = data(x_shape);
  const int64_t rows = kBatch / dist::size(), begin = dist::rank() * rows;
  const std::vector<Tensor> reference = train(make(), d, 0, kBatch, false, false);
  const std::vector<Tensor> eager = train(make(), d, begin, begin + rows, true, false);
  const std::vector<Tensor> traced = train(make(), d, begin, begin + rows, true, true);
  const std::vector<Tensor> traced_again = train(make(), d, begin, begin + rows, true, true);
  EXPECT_LE(max_relative(eager, reference), 1e-12) << dist::size() << " ranks against one process";
  EXPECT_TRUE(bitwise(eager, traced)) << "data-parallel eager and traced differ";
  EXPECT_TRUE(bitwise(traced, traced_again)) << "two runs differ";
  expect_same_on_every_rank(traced);
  // Small buckets (one per parameter): the same bits as one big bucket.
  const std::vector<Tensor> small =
      train(make(), d, begin, begin + rows, true, true, {.bucket_bytes = 0});
  EXPECT_TRUE(bitwise(small, traced)) << "bucket size changed the result";
  // Without overlap every step still averages (it did only the first: the buckets stayed reduced).
  const std::vector<Tensor> serial =
      train(make(), d, begin, begin + rows, true, true, {.overlap = false});
  EXPECT_TRUE(bitwise(serial, traced)) << "overlap changed the result";
}

TEST(DataParallel, Conv1DMatchesOneProcessOnTheWholeBatch) {
  check_exactness(conv_model, {kBatch, 10, 3});
}

TEST(DataParallel, BiLSTMMatchesOneProcessOnTheWholeBatch) {
  check_exactness(bilstm_model, {kBatch, 6, 3});
}

TEST(DataParallel, TinyDenseStepMakesExactlyOneAllReduce) {
  manual_seed(1);
  nn::Sequential model;
  model.add<nn::Dense>(8, nn::DenseOptions{.activation = "relu"});
  model.add<nn::Dense>(1);
  model.build({4, 6});
  auto opt = dist::DistributedOptimizer(std::make_shared<nn::Adam>(model.parameters()));
  EXPECT_EQ(dist::buckets(*opt).size(), 1u);
  const Tensor x = test::rand32({4, 6}), y = test::rand32({4, 1}, 2);
  auto step = trace([&](const Tensor& xb, const Tensor& yb) {
    opt->zero_grad();
    const Tensor loss = nn::mean_squared_error(yb, model(xb));
    loss.backward();
    opt->step();
    return loss;
  });
  for (int i = 0; i < 3; ++i) {
    const int64_t before = Ledger::global().get(Counter::Collectives);
    step(x, y);
    EXPECT_EQ(Ledger::global().get(Counter::Collectives) - before, 1) << "call " << i;
  }
  const graph::Graph& g = step.function().last_plan()->graph();
  EXPECT_EQ(g.count("all_reduce_start_"), 1);
  EXPECT_EQ(g.count("all_reduce_wait_"), 1);
  EXPECT_EQ(g.count("all_reduce"), 0);
}

TEST(DataParallel, BucketsStartInTheBackwardAndUpdateOneByOne) {
  const auto model = conv_model();
  // Small buckets: the Dense layer's two parameters, then each of the convolution's.
  const int64_t dense_bytes = (4 * 1 + 1) * 8;
  auto opt = dist::DistributedOptimizer(std::make_shared<nn::Adam>(model->parameters()),
                                        {.bucket_bytes = dense_bytes});
  const std::vector<std::vector<size_t>> b = dist::buckets(*opt);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0], (std::vector<size_t>{3, 2}));  // reverse order: the last layer first
  EXPECT_EQ(b[1], (std::vector<size_t>{1}));
  EXPECT_EQ(b[2], (std::vector<size_t>{0}));
  const Data d = data({kBatch, 10, 3});
  auto step = trace([&](const Tensor& x, const Tensor& y) {
    opt->zero_grad();
    const Tensor loss = nn::mean_squared_error(y, (*model)(x));
    loss.backward();
    opt->step();
    return loss;
  });
  step(d.x, d.y);
  step(d.x, d.y);
  const std::vector<graph::Node>& nodes = step.function().last_plan()->graph().nodes;
  std::vector<size_t> starts, waits, updates;
  size_t last_conv_gradient = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const std::string name = nodes[i].op->name;
    if (name == "all_reduce_start_") starts.push_back(i);
    if (name == "all_reduce_wait_") waits.push_back(i);
    if (name == "adam_update") updates.push_back(i);
    if (name.starts_with("conv1d") && name.find("backward") != std::string::npos)
      last_conv_gradient = i;
  }
  ASSERT_EQ(starts.size(), 3u);
  ASSERT_EQ(waits.size(), 3u);
  ASSERT_EQ(updates.size(), 3u);
  EXPECT_LT(starts[0], last_conv_gradient)
      << "the Dense bucket waited for the convolution's gradients";
  EXPECT_LT(updates[0], waits[1]) << "the first bucket's update waited for the second bucket";
}

TEST(DataParallel, BroadcastParametersCopiesRankZero) {
  manual_seed(100 + dist::rank());  // different weights on every rank
  nn::Sequential model;
  model.add<nn::Dense>(3);
  model.build({2, 4});
  dist::broadcast_parameters(model);
  expect_same_on_every_rank(model.parameters());
}

// fit with a DistributedOptimizer: each rank trains on its rows of every shuffled global batch;
// the result is one process's fit with the same batches, and the epoch logs and evaluate are
// means over all the rows.
TEST(DataParallel, FitMatchesOneProcessAndLogsAllRows) {
  const Data d = data({24, 10, 3});
  auto fit = [&](bool distributed) {
    auto module = conv_model();
    nn::Model model(module);
    std::shared_ptr<nn::Optimizer> opt = std::make_shared<nn::Adam>(module->parameters(), 0.01);
    if (distributed) opt = dist::DistributedOptimizer(opt);
    model.compile(opt, "mse");
    const nn::History h =
        model.fit(d.x, d.y, {.batch_size = kBatch, .epochs = 3, .seed = 5, .verbose = 0});
    const nn::Logs eval = model.evaluate(d.x, d.y, 8);
    std::vector<Tensor> params;
    for (const Tensor& p : module->parameters()) params.push_back(p.clone());
    return std::tuple{params, h.history.at("loss"), eval.at("loss")};
  };
  const auto [ref_params, ref_loss, ref_eval] = fit(false);
  const auto [params, loss, eval] = fit(true);
  EXPECT_LE(max_relative(params, ref_params), 1e-12);
  for (size_t e = 0; e < loss.size(); ++e)
    EXPECT_NEAR(loss[e], ref_loss[e], 1e-12 * std::fabs(ref_loss[e])) << e;
  EXPECT_NEAR(eval, ref_eval, 1e-12 * std::fabs(ref_eval));
  expect_same_on_every_rank(params);
}

Tensor param() {
  Tensor p = test::rand32({2});
  p.set_requires_grad(true);
  return p;
}

TEST(DataParallel, ErrorsNameTheCall) {
  auto opt = std::make_shared<nn::SGD>(std::vector<Tensor>{param()});
  dist::DistributedOptimizer(opt);
  test::expect_throw_message<ValueError>([&] { dist::DistributedOptimizer(opt); },
                                         "distributed already");
  test::expect_throw_message<ValueError>(
      [] {
        dist::DistributedOptimizer(std::make_shared<nn::SGD>(std::vector<Tensor>{param()}),
                                   {.bucket_bytes = -1});
      },
      "bucket_bytes");
  test::expect_throw_message<ValueError>([] { dist::buckets(nn::SGD({param()})); },
                                         "not distributed");
}

}  // namespace
}  // namespace encore
