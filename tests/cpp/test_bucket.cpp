// Shape bucketing is exact: for every built-in layer and for small Conv1D, LSTM and BiLSTM
// models, a bucketed traced call equals the eager call on the unpadded input over random
// lengths, forward and training (parameters after several steps). The true length enters
// the graph as data (no retrace within a bucket); outputs are trimmed only where they carry
// the padded axis; what cannot be exact is refused at trace time, naming the op.
#include <random>

#include "core/modes.h"
#include "graph/trace.h"
#include "helpers.h"
#include "nn/gru.h"
#include "nn/layers.h"
#include "nn/losses.h"
#include "nn/lstm.h"
#include "nn/normalization.h"
#include "nn/optim.h"
#include "train/model.h"

namespace encore {
namespace {

using test::rand32;
using ModulePtr = std::shared_ptr<nn::Module>;

struct LayerCase {
  std::string name;
  std::function<ModulePtr()> make;
  bool indices = false;  // the input is (batch, steps) int64 indices (Embedding)
  bool eval = false;     // trained in inference mode (Dropout)
};

template <class L, class... A> std::function<ModulePtr()> make(A... args) {
  return [=] { return std::make_shared<L>(args...); };
}

std::vector<LayerCase> layer_cases() {
  using nn::Conv1DOptions;
  using nn::GRUOptions;
  using nn::LSTMOptions;
  auto stacked = [] {
    auto m = std::make_shared<nn::Sequential>();
    m->add<nn::Conv1D>(4, 3, Conv1DOptions{.padding = "same", .activation = "relu"});
    m->add<nn::Conv1D>(4, 3, Conv1DOptions{.padding = "same"});
    m->add<nn::Conv1D>(3, 2);
    m->add<nn::Conv1D>(3, 3, Conv1DOptions{.padding = "causal", .dilation_rate = 2});
    return m;
  };
  return {
      {"dense", make<nn::Dense>(5, nn::DenseOptions{.activation = "relu"})},
      {"conv1d_valid", make<nn::Conv1D>(4, 3)},
      {"conv1d_same", make<nn::Conv1D>(4, 3, Conv1DOptions{.padding = "same"})},
      {"conv1d_causal", make<nn::Conv1D>(4, 3, Conv1DOptions{.padding = "causal"})},
      {"conv1d_dilated_causal",
       make<nn::Conv1D>(4, 3, Conv1DOptions{.padding = "causal", .dilation_rate = 2})},
      {"conv1d_strided", make<nn::Conv1D>(4, 3, Conv1DOptions{.strides = 2})},
      {"conv1d_same_strided",
       make<nn::Conv1D>(4, 4, Conv1DOptions{.strides = 3, .padding = "same"})},
      {"conv1d_stacked", stacked},
      {"max_pooling", make<nn::MaxPooling1D>(nn::Pooling1DOptions{.pool_size = 2})},
      {"average_pooling",
       make<nn::AveragePooling1D>(nn::Pooling1DOptions{.pool_size = 3, .strides = 2})},
      {"global_average_pooling", make<nn::GlobalAveragePooling1D>()},
      {"global_max_pooling", make<nn::GlobalMaxPooling1D>()},
      {"lstm_last_state", make<nn::LSTM>(6)},
      {"lstm_sequences", make<nn::LSTM>(6, LSTMOptions{.return_sequences = true})},
      {"lstm_reverse", make<nn::LSTM>(6, LSTMOptions{.return_sequences = true, .reverse = true})},
      {"lstm_reverse_last_state", make<nn::LSTM>(6, LSTMOptions{.reverse = true})},
      {"gru_last_state", make<nn::GRU>(5)},
      {"gru_backwards_sequences",
       make<nn::GRU>(5, GRUOptions{.return_sequences = true, .go_backwards = true})},
      {"gru_reset_before_backwards",
       make<nn::GRU>(
           5, GRUOptions{.return_sequences = true, .go_backwards = true, .reset_after = false})},
      {"bidirectional_lstm",
       [] {
         return std::make_shared<nn::Bidirectional>(
             std::make_shared<nn::LSTM>(6, LSTMOptions{.return_sequences = true}));
       }},
      {"bidirectional_gru_last_state",
       [] {
         return std::make_shared<nn::Bidirectional>(std::make_shared<nn::GRU>(5),
                                                    nn::BidirectionalOptions{.merge_mode = "sum"});
       }},
      {"bidirectional_gru_sequences",
       [] {
         return std::make_shared<nn::Bidirectional>(
             std::make_shared<nn::GRU>(5, GRUOptions{.return_sequences = true}));
       }},
      {"dropout", make<nn::Dropout>(0.5), false, true},
      {"batch_normalization", make<nn::BatchNormalization>()},
      {"layer_normalization", make<nn::LayerNormalization>()},
      {"embedding", make<nn::Embedding>(10, 4), true},
  };
}

std::vector<int64_t> random_lengths(int n, int64_t lo, int64_t hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> d(lo, hi);
  std::vector<int64_t> v;
  for (int i = 0; i < n; ++i) v.push_back(d(rng));
  return v;
}

Tensor input_of(const LayerCase& c, int64_t len, uint64_t seed) {
  if (!c.indices) return rand32({2, len, 3}, seed);
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::vector<int64_t> v(2 * len);
  for (int64_t& i : v) i = static_cast<int64_t>(rng() % 10);
  return from_vector(v, {2, len});
}

ModulePtr built(const LayerCase& c) {
  manual_seed(1);
  ModulePtr m = c.make();
  m->build(c.indices ? Shape{2, 9} : Shape{2, 9, 3});
  return m;
}

// The two ops the masking is made of, on known values: per row, the valid prefix reversed, or
// the entries past it overwritten; a length per row or one for all.
TEST(Bucket, ReverseAndMaskSequenceKeepToTheValidPrefix) {
  const Tensor x = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}, {2, 4});
  const Tensor per_row = from_vector(std::vector<int64_t>{3, 1}, {2});
  test::expect_values(reverse_sequence(x, per_row), {3, 2, 1, 4, 5, 6, 7, 8});
  test::expect_values(mask_sequence(x, per_row, 1, -1.0), {1, 2, 3, -1, 5, -1, -1, -1});
  const Tensor one = from_vector(std::vector<int64_t>{2}, {1});
  test::expect_values(reverse_sequence(x, one), {2, 1, 3, 4, 6, 5, 7, 8});
  test::expect_values(mask_sequence(x, one, 0), {1, 2, 3, 4, 5, 6, 7, 8});
  test::expect_values(mask_sequence(x, from_vector(std::vector<int64_t>{1}, {1}), 0),
                      {1, 2, 3, 4, 0, 0, 0, 0});
  try {
    reverse_sequence(x, from_vector(std::vector<int64_t>{1, 2, 3}, {3}));
    ADD_FAILURE() << "lengths of the wrong shape must be refused";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("[reverse_sequence] lengths (3,) must be (1,) or, one per "
                                         "row of (2, 4) along axis 1 > 0, (2,)"),
              std::string::npos)
        << e.what();
  }
}

// Hostile lengths are clamped to the axis (the kernels cannot raise on the GPU): a negative
// length masks everything and reverses nothing, one past the axis covers the whole row; an
// empty input stays empty.
TEST(Bucket, SequenceLengthsOutsideTheAxisAreClamped) {
  const Tensor x = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}, {2, 4});
  const Tensor lengths = from_vector(std::vector<int64_t>{-3, 100}, {2});
  test::expect_values(reverse_sequence(x, lengths), {1, 2, 3, 4, 8, 7, 6, 5});
  test::expect_values(mask_sequence(x, lengths, 1, -1.0), {-1, -1, -1, -1, 5, 6, 7, 8});
  const Tensor empty = zeros({0, 4});
  EXPECT_EQ(reverse_sequence(empty, from_vector(std::vector<int64_t>{2}, {1})).shape(),
            empty.shape());
  EXPECT_EQ(mask_sequence(empty, from_vector(std::vector<int64_t>{2}, {1})).shape(), empty.shape());
}

const ShapePolicy kBuckets = ShapePolicy::bucket(1, {12, 20, 32});

TEST(Bucket, EveryLayerForwardEqualsEagerOverRandomLengths) {
  const TrainingGuard inference(false);
  for (const LayerCase& c : layer_cases()) {
    SCOPED_TRACE(c.name);
    const ModulePtr layer = built(c);
    auto f =
        trace([&](const Tensor& x) { return (*layer)(x); }, {.name = c.name, .shapes = kBuckets});
    for (int64_t len : random_lengths(20, 5, 32, 7)) {
      const Tensor x = input_of(c, len, static_cast<uint64_t>(len));
      const Tensor eager = (*layer)(x), bucketed = f(x);
      ASSERT_EQ(bucketed.shape(), eager.shape()) << "length " << len;
      EXPECT_LT(test::max_abs_diff(bucketed, eager), 1e-5) << "length " << len;
    }
    EXPECT_EQ(f.stats().traces, 3);  // one per bucket: the length is data
  }
}

// One SGD step on a mean squared error against 0.5 over the layer's output (a loss that
// averages over the steps when the output has them).
std::function<Tensor(const Tensor&)> sgd_step(const ModulePtr& m,
                                              const std::shared_ptr<nn::SGD>& opt) {
  return [m, opt](const Tensor& x) {
    opt->zero_grad();
    const Tensor y = (*m)(x);
    Tensor loss = nn::mean_squared_error(full_like(y, 0.5), y);
    loss.backward();
    opt->step();
    return loss;
  };
}

TEST(Bucket, EveryLayerTrainsAsEagerOverRandomLengths) {
  for (const LayerCase& c : layer_cases()) {
    SCOPED_TRACE(c.name);
    const ModulePtr eager_layer = built(c), traced_layer = built(c);
    if (c.eval) {
      eager_layer->eval();
      traced_layer->eval();
    }
    if (eager_layer->parameters().empty()) continue;  // nothing to train
    auto eager_opt = std::make_shared<nn::SGD>(eager_layer->parameters(), 0.1);
    auto traced_opt = std::make_shared<nn::SGD>(traced_layer->parameters(), 0.1);
    auto eager_step = sgd_step(eager_layer, eager_opt);
    auto traced_step =
        trace(sgd_step(traced_layer, traced_opt), {.name = c.name, .shapes = kBuckets});
    for (int64_t len : random_lengths(20, 5, 32, 11)) {
      const Tensor x = input_of(c, len, static_cast<uint64_t>(50 + len));
      const Tensor le = eager_step(x), lt = traced_step(x);
      EXPECT_LT(test::max_abs_diff(lt, le), 1e-5) << "length " << len;
    }
    EXPECT_EQ(traced_step.stats().traces, 3);
    const auto pe = eager_layer->named_weights(), pt = traced_layer->named_weights();
    for (size_t i = 0; i < pe.size(); ++i)
      EXPECT_LT(test::max_abs_diff(pt[i].second, pe[i].second), 1e-4) << pe[i].first;
  }
}

// The models: a small Conv1D model (strided 'same' Conv1D -> GAP -> Dropout -> Dense),
// an LSTM and a BiLSTM reading the final state, trained with binary cross-entropy.
std::shared_ptr<nn::Sequential> model_of(const std::string& kind) {
  manual_seed(3);
  auto m = std::make_shared<nn::Sequential>();
  if (kind == "conv1d") {
    m->add<nn::Conv1D>(8, 5, nn::Conv1DOptions{.strides = 2, .padding = "same"});
    m->add<nn::GlobalAveragePooling1D>();
    m->add<nn::Dropout>(0.5)->eval();  // a bucketed dropout draws over the padded shape
    m->add<nn::Dense>(4, nn::DenseOptions{.activation = "relu"});
  } else if (kind == "lstm") {
    m->add<nn::LSTM>(8);
  } else {
    m->add<nn::Bidirectional>(std::make_shared<nn::LSTM>(8));
  }
  m->add<nn::Dense>(1, nn::DenseOptions{.activation = "sigmoid"});
  m->build({4, 9, 3});
  return m;
}

TEST(Bucket, ModelsForwardAndTrainingEqualEager) {
  for (const std::string kind : {"conv1d", "lstm", "bilstm"}) {
    SCOPED_TRACE(kind);
    const auto eager_model = model_of(kind), traced_model = model_of(kind);
    nn::Adam eager_opt(eager_model->parameters(), 1e-2),
        traced_opt(traced_model->parameters(), 1e-2);
    auto step_of = [](nn::Sequential& m, nn::Adam& opt) {
      return [&m, &opt](const Tensor& x, const Tensor& y) {
        opt.zero_grad();
        Tensor loss = nn::binary_crossentropy(y, m(x));
        loss.backward();
        opt.step();
        return loss;
      };
    };
    auto eager_step = step_of(*eager_model, eager_opt);
    auto traced_step = trace(step_of(*traced_model, traced_opt), {.shapes = kBuckets});
    auto predict = trace([&](const Tensor& x) { return (*traced_model)(x); }, {.shapes = kBuckets});
    const Tensor y = gt(rand32({4, 1}, 8), 0.0);
    for (int64_t len : random_lengths(20, 5, 32, 13)) {
      const Tensor x = rand32({4, len, 3}, static_cast<uint64_t>(200 + len));
      {
        const TrainingGuard inference(false);
        EXPECT_LT(test::max_abs_diff(predict(x), (*eager_model)(x)), 1e-5) << "length " << len;
      }
      const Tensor le = eager_step(x, y), lt = traced_step(x, y);
      EXPECT_LT(test::max_abs_diff(lt, le), 1e-5) << "length " << len;
    }
    EXPECT_EQ(traced_step.stats().traces, 3);
    const auto pe = eager_model->parameters(), pt = traced_model->parameters();
    for (size_t i = 0; i < pe.size(); ++i) EXPECT_LT(test::max_abs_diff(pt[i], pe[i]), 1e-4) << i;
  }
}

// A replay at another length of the same bucket binds the length as data: no retrace, and
// the stats count the retraces saved and the padding.
TEST(Bucket, LengthIsDataAndStatsCountWhatBucketingSaves) {
  manual_seed(2);
  nn::LSTM lstm(4);
  lstm.build({2, 9, 3});
  auto f =
      trace([&](const Tensor& x) { return lstm(x); }, {.shapes = ShapePolicy::bucket(1, {16})});
  for (int64_t len : {9, 10, 11, 16, 10}) f(rand32({2, len, 3}, static_cast<uint64_t>(len)));
  const TraceStats& s = f.stats();
  EXPECT_EQ(s.traces, 1);
  EXPECT_EQ(s.retraces_saved, 3);  // lengths 10, 11 and 16 replayed the graph traced at 9
  EXPECT_EQ(s.real_elements, 2 * 3 * (9 + 10 + 11 + 16 + 10));
  EXPECT_EQ(s.padding_elements, 2 * 3 * (7 + 6 + 5 + 0 + 6));
  EXPECT_NE(s.table("f").find(
                "bucketing: 3 retraces saved; 144 zeros added to 336 elements (42% padding)"),
            std::string::npos)
      << s.table("f");
  EXPECT_NE(s.records[0].signature.find("length: (1,) int64"), std::string::npos)
      << s.records[0].signature;
  for (const AxisValues& v : f.function().axis_values()) EXPECT_EQ(v.arg, 0);  // not the length
}

// A batch-axis bucket: the loss averages over the real rows, BatchNormalization takes its
// statistics over them; training follows eager training.
TEST(Bucket, BatchAxisBucketTrainsAsEager) {
  auto make = [] {
    manual_seed(4);
    auto m = std::make_shared<nn::Sequential>();
    m->add<nn::Dense>(4);
    m->add<nn::BatchNormalization>();
    m->add<nn::Dense>(1, nn::DenseOptions{.activation = "sigmoid"});
    m->build({5, 3});
    return m;
  };
  const auto eager_model = make(), traced_model = make();
  nn::SGD eager_opt(eager_model->parameters(), 0.1), traced_opt(traced_model->parameters(), 0.1);
  auto step_of = [](nn::Sequential& m, nn::SGD& opt) {
    return [&m, &opt](const Tensor& x, const Tensor& y) {
      opt.zero_grad();
      Tensor loss = nn::binary_crossentropy(y, m(x));
      loss.backward();
      opt.step();
      return loss;
    };
  };
  auto eager_step = step_of(*eager_model, eager_opt);
  auto traced_step =
      trace(step_of(*traced_model, traced_opt),
            {.shapes = ShapePolicy::bucket(0, {8}, {0, 1}), .arg_names = {"x", "y"}});
  for (int64_t rows : random_lengths(20, 2, 8, 17)) {
    const auto r = static_cast<uint64_t>(rows);
    const Tensor x = rand32({rows, 3}, 300 + r), y = gt(rand32({rows, 1}, 400 + r), 0.0);
    EXPECT_LT(test::max_abs_diff(traced_step(x, y), eager_step(x, y)), 1e-5) << rows;
  }
  EXPECT_EQ(traced_step.stats().traces, 1);
  const auto pe = eager_model->named_weights(), pt = traced_model->named_weights();
  for (size_t i = 0; i < pe.size(); ++i)
    EXPECT_LT(test::max_abs_diff(pt[i].second, pe[i].second), 1e-4) << pe[i].first;
}

// The training API: a bucketed Model averages its loss and its metrics over the valid steps
// (per-step labels), as the eager Model does on the unpadded batch.
TEST(Bucket, ModelTrainsAndMeasuresAsEager) {
  auto make = [](nn::CompileOptions options) {
    manual_seed(8);
    auto net = std::make_shared<nn::Sequential>();
    net->add<nn::Conv1D>(4, 3, nn::Conv1DOptions{.padding = "same", .activation = "relu"});
    net->add<nn::Dense>(1, nn::DenseOptions{.activation = "sigmoid"});
    net->build({2, 9, 3});
    auto model = std::make_unique<nn::Model>(net);
    options.metrics = {"accuracy", "mae"};
    model->compile("sgd", "binary_crossentropy", options);
    return std::make_pair(net, std::move(model));
  };
  auto [eager_net, eager] = make({.mode = nn::ExecutionMode::Eager});
  auto [traced_net, traced] = make({.shapes = ShapePolicy::bucket(1, {16, 32}, {0, 1})});
  for (int64_t len : random_lengths(20, 5, 32, 19)) {
    const auto seed = static_cast<uint64_t>(500 + len);
    const Tensor x = rand32({2, len, 3}, seed), y = gt(rand32({2, len, 1}, seed + 1), 0.0);
    const nn::Logs le = eager->train_on_batch(x, y), lt = traced->train_on_batch(x, y);
    for (const auto& [name, value] : le)
      EXPECT_NEAR(lt.at(name), value, 1e-5) << name << " at length " << len;
  }
  const auto pe = eager_net->parameters(), pt = traced_net->parameters();
  for (size_t i = 0; i < pe.size(); ++i) EXPECT_LT(test::max_abs_diff(pt[i], pe[i]), 1e-4) << i;
}

// The retrace warning suggests a bucket policy where one would be exact: checked on a trace
// made as a bucket would make it (the layers masking), so a recurrent model gets the
// suggestion and a softmax over the steps does not.
TEST(Bucket, RetraceWarningSuggestsABucketWhereMaskingMakesItExact) {
  manual_seed(9);
  nn::Sequential model;
  model.add<nn::LSTM>(4);
  model.add<nn::Dense>(1);
  model.build({2, 4, 3});
  nn::ActivationLayer softmax("softmax");
  std::string warning;
  const TraceOptions options{.retrace_warning = 2,
                             .on_warning = [&](const std::string& w) { warning = w; }};
  auto f = trace([&](const Tensor& x) { return model(x); }, options);
  for (int64_t len : {4, 5, 6}) f(rand32({2, len, 3}));
  EXPECT_NE(warning.find("is exact for this function: bucket(axis 1, sizes 8)"), std::string::npos)
      << warning;
  auto g = trace([&](const Tensor& x) { return softmax(x); }, options);
  for (int64_t len : {4, 5, 6}) g(rand32({2, len}));
  EXPECT_NE(warning.find("would not be exact for this function (it would be refused: [activation] "
                         "cannot be exact"),
            std::string::npos)
      << warning;
}

// A training-mode dropout draws its mask over the padded shape: the same distribution, other
// random numbers than the eager call. Not silent: the trace says so once; in eval mode nothing.
TEST(Bucket, TrainingDropoutWarnsItIsExactInDistributionOnly) {
  nn::Sequential model;
  model.add<nn::Dropout>(0.5);
  model.build({2, 4, 3});
  std::vector<std::string> warnings;
  const TraceOptions options{.shapes = ShapePolicy::bucket(1, {8, 16}),
                             .on_warning = [&](const std::string& w) { warnings.push_back(w); }};
  auto f = trace([&](const Tensor& x) { return model(x); }, options);
  for (int64_t len : {4, 5, 12}) f(rand32({2, len, 3}));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("exact in distribution only: dropout: in training its mask is drawn "
                             "over the padded shape"),
            std::string::npos)
      << warnings[0];
  model.eval();
  warnings.clear();
  auto g = trace([&](const Tensor& x) { return model(x); }, options);
  for (int64_t len : {4, 12}) g(rand32({2, len, 3}));
  EXPECT_TRUE(warnings.empty());
}

void expect_refused(const std::function<void()>& call, const std::string& says) {
  try {
    call();
    ADD_FAILURE() << "expected a refusal saying: " << says;
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

// What cannot be exact is refused at trace time, naming the op: a built-in layer by its rule,
// anything else (plain ops reading across the axis) by the probe.
TEST(Bucket, WhatCannotBeExactIsRefusedNamingTheOp) {
  manual_seed(6);
  nn::Sequential flat;
  flat.add<nn::Flatten>();
  flat.add<nn::Dense>(2);
  flat.build({2, 9, 3});
  auto f = trace([&](const Tensor& x) { return flat(x); }, {.name = "flat", .shapes = kBuckets});
  expect_refused(
      [&] {
        f(rand32({2, 9, 3}));
      },
      "[flatten] cannot be exact under a bucket policy: it flattens the padded axis");
  EXPECT_EQ(f.function().cache_size(), 0u);

  nn::AveragePooling1D pool({.pool_size = 2, .strides = std::nullopt, .padding = "same"});
  auto p = trace([&](const Tensor& x) { return pool(x); }, {.shapes = kBuckets});
  expect_refused([&] { p(rand32({2, 9, 3})); }, "[average_pooling1d] cannot be exact");

  auto sums =
      trace([](const Tensor& x) { return sum(x, {1}); }, {.name = "sums", .shapes = kBuckets});
  expect_refused(
      [&] {
        sums(rand32({2, 9, 3}));
      },
      "[trace] bucket(axis 1, sizes 12/20/32) of 'sums' cannot be exact: output 0 (made by sum)");
}

// A function that writes an argument in place: the probes of a bucket's first trace, and those
// of the retrace warning's advice (fuzzer program 131:4145), write copies of it. The caller's
// tensor is written once per call, as eagerly; a write that depends on the padding is refused.
TEST(Bucket, ProbesNeverWriteTheCallersArguments) {
  auto halve_and_add = [](const Tensor& x, const Tensor& a) {
    NoGradGuard no_grad;
    Tensor(a).copy_(a * 0.5 + 2.0);
    return sum(x, {1});
  };
  auto values_after = [&](auto&& step, const std::vector<int64_t>& lengths) {
    const Tensor a = zeros({2, 2});
    for (int64_t len : lengths) (void)step(rand32({2, len, 3}), a);
    return a;
  };
  const std::vector<int64_t> lengths = {9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19};
  const Tensor eager = values_after(halve_and_add, lengths);
  auto warned =
      trace(halve_and_add, {.retrace_warning = 2, .on_warning = [](const std::string&) {}});
  EXPECT_TRUE(test::bitwise_equal(values_after(warned, lengths), eager));
  auto bucketed =
      trace([&](const Tensor& x, const Tensor& a) { return sum(halve_and_add(x, a) * 0.0, {0}); },
            {.shapes = kBuckets});
  EXPECT_TRUE(test::bitwise_equal(values_after(bucketed, lengths), eager));

  auto spoils = trace(
      [](const Tensor& x, const Tensor& a) {
        NoGradGuard no_grad;
        Tensor(a).copy_(sum(x, {1}));
        return x * 2.0;
      },
      {.name = "spoils", .shapes = kBuckets});
  // The call ran eagerly before the trace was refused: `a` holds what the eager call wrote.
  const Tensor a = zeros({2, 3}), x = rand32({2, 9, 3});
  expect_refused([&] { spoils(x, a); }, "cannot be exact: 'a");
  EXPECT_TRUE(test::bitwise_equal(a, sum(x, {1})));
}

// A layer of the user's without a bucketing rule (a per-step scale, as the Python
// module): its output is not registered, so the layers after it do not mask.
class Scale : public nn::Module {
 public:
  std::string type_name() const override { return "scale"; }

 protected:
  Shape build_impl(const Shape& input_shape) override { return input_shape; }
  Tensor forward_impl(const Tensor& x) override { return x * 2.0; }
};

std::shared_ptr<nn::LSTM> sequences_lstm() {
  manual_seed(21);
  auto lstm = std::make_shared<nn::LSTM>(4, nn::LSTMOptions{.return_sequences = true});
  lstm->build({2, 9, 3});
  return lstm;
}

// Code that reads padded positions downstream of a layer that zeroes them (an LSTM returning
// sequences, a 'same' Conv1D) saw the same zeros whatever the padding held, so the fill probes
// passed it: a mean over 12 steps of a length-10 call was 10/12 of eager's. The probe now
// overwrites the padded entries of every registered layer output and compares with the call
// traced without padding: each of these is refused at the bucket's first trace.
TEST(Bucket, ReadsOfPaddingAfterAMaskingLayerAreRefused) {
  const auto lstm = sequences_lstm();
  auto same_conv = std::make_shared<nn::Conv1D>(3, 3, nn::Conv1DOptions{.padding = "same"});
  same_conv->build({2, 9, 3});
  nn::Sequential between;  // LSTM -> a layer of the user's -> global average pooling
  between.add(lstm);
  between.add<Scale>();
  between.add<nn::GlobalAveragePooling1D>();
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> cases = {
      {"user layer between built-in layers", [&](const Tensor& x) { return between(x); }},
      {"mean over the steps", [&](const Tensor& x) { return mean((*lstm)(x), {1}); }},
      {"max over the steps", [&](const Tensor& x) { return max((*lstm)(x), {1}); }},
      {"softmax over the steps", [&](const Tensor& x) { return softmax((*lstm)(x), 1); }},
      {"last step",
       [&](const Tensor& x) {
         const Tensor y = (*lstm)(x);
         return y.slice(1, y.shape()[1] - 1, y.shape()[1]);
       }},
      {"last step of a 'same' Conv1D",
       [&](const Tensor& x) {
         const Tensor y = (*same_conv)(x);
         return y.slice(1, y.shape()[1] - 1, y.shape()[1]);
       }},
      {"loss on the last step",
       [&](const Tensor& x) {
         const Tensor y = (*lstm)(x);
         const Tensor last = y.slice(1, y.shape()[1] - 1, y.shape()[1]);
         return nn::mean_squared_error(full_like(last, 0.5), last);
       }},
      {"count of the steps", [](const Tensor& x) { return sum(x * 0.0 + 1.0, {1}); }},
  };
  for (const auto& [name, body] : cases) {
    SCOPED_TRACE(name);
    auto f = trace(body, {.name = "f", .shapes = ShapePolicy::bucket(1, {12})});
    expect_refused([&] { f(rand32({2, 7, 3}, 1)); }, "of 'f' cannot be exact");
    EXPECT_EQ(f.function().cache_size(), 0u);
  }
  // A count of the steps after a strided window: ceil(11 / 2) == ceil(12 / 2), so a call of length
  // 11 hides it; the bucket is compared without padding at the shortest length it serves.
  nn::AveragePooling1D strided({.pool_size = 1, .strides = 2});
  auto f = trace([&](const Tensor& x) { return sum(strided(x) * 0.0 + 1.0, {1}); },
                 {.name = "f", .shapes = ShapePolicy::bucket(1, {12})});
  expect_refused(
      [&] {
        f(rand32({2, 11, 3}, 1));
      },
      "is 83.3% off the call of length 1 without padding");
}

// The minimal case, trained: the probe refuses it where main trained on padding.
TEST(Bucket, AMeanOverAMaskedSequenceIsNotSuggested) {
  const auto lstm = sequences_lstm();
  std::string warning;
  auto f = trace([&](const Tensor& x) { return mean((*lstm)(x), {1}); },
                 {.retrace_warning = 2, .on_warning = [&](const std::string& w) { warning = w; }});
  for (int64_t len : {8, 9, 10}) (void)f(rand32({2, len, 3}, static_cast<uint64_t>(len)));
  EXPECT_NE(warning.find("would not be exact for this function"), std::string::npos) << warning;
  EXPECT_EQ(warning.find("is exact for this function"), std::string::npos) << warning;
}

std::string error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// Calls eager refuses are refused under a bucket with eager's error: the bucket serves only the
// lengths at which every layer has a valid step (shorter ones, and length 0, trace exactly and
// do what eager does). Before, each returned numbers.
TEST(Bucket, CallsEagerRefusesAreRefusedWithEagersError) {
  manual_seed(22);
  nn::MaxPooling1D pool({.pool_size = 3});
  nn::Conv1D conv(2, 4);
  conv.build({2, 9, 3});
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> cases = {
      {"max_pooling1d(3)", [&](const Tensor& x) { return pool(x); }},
      {"valid conv1d, kernel 4", [&](const Tensor& x) { return conv(x); }},
  };
  for (const auto& [name, body] : cases) {
    SCOPED_TRACE(name);
    auto f = trace(body, {.shapes = ShapePolicy::bucket(1, {8})});
    (void)f(rand32({2, 7, 3}, 3));
    for (int64_t len : {2, 0}) {
      const Tensor x = rand32({2, len, 3}, 4);
      const std::string eager = error_of([&] { (void)body(x); });
      EXPECT_NE(eager, "no error") << "length " << len;
      EXPECT_EQ(error_of([&] { (void)f(x); }), eager) << "length " << len;
    }
    // Lengths it serves still replay the bucket's graph.
    for (int64_t len : {4, 8}) {
      const Tensor x = rand32({2, len, 3}, 5);
      EXPECT_LT(test::max_abs_diff(f(x), body(x)), 1e-5) << "length " << len;
    }
    EXPECT_EQ(f.stats().traces, 1);
    // The calls traced exactly are not counted as bucketed ones.
    EXPECT_EQ(f.stats().real_elements, 2 * 3 * (7 + 4 + 8));
  }
}

// A feedback of an aliased output (h = f(x, h)) read memory the replay was overwriting from the
// third call on; the argument is now read from a copy. One the function writes in place is
// refused.
TEST(Bucket, AliasedOutputsFedBackAreCopied) {
  // An LSTM cell: c is read after the gate pre-activations z, which the memory plan places where
  // the outputs go once z is dead.
  const Tensor w = rand32({3, 12}, 30);
  auto cell = [&](const Tensor& x, const Tensor& h, const Tensor& c) {
    const Tensor z = matmul(h, w) + x;
    const Tensor i = sigmoid(z.slice(1, 0, 3)), f = sigmoid(z.slice(1, 3, 6)),
                 g = tanh(z.slice(1, 6, 9)), o = sigmoid(z.slice(1, 9, 12));
    const Tensor c2 = f * c + i * g;
    return std::make_pair(o * tanh(c2), c2);
  };
  auto f = trace(cell, {.alias_outputs = true});
  Tensor h_eager = zeros({2, 3}), c_eager = zeros({2, 3}), h_traced = h_eager, c_traced = c_eager;
  for (int i = 0; i < 6; ++i) {
    const Tensor x = rand32({2, 12}, static_cast<uint64_t>(40 + i));
    std::tie(h_eager, c_eager) = cell(x, h_eager, c_eager);
    std::tie(h_traced, c_traced) = f(x, h_traced, c_traced);
    ASSERT_TRUE(test::bitwise_equal(h_traced, h_eager) && test::bitwise_equal(c_traced, c_eager))
        << "call " << i + 1;
  }
  auto writes = trace(
      [](const Tensor& h) {
        NoGradGuard no_grad;
        Tensor(h).copy_(h * 2.0);
        return h * 1.0;
      },
      {.alias_outputs = true});
  Tensor h = ones({2});
  for (int i = 0; i < 2; ++i) h = writes(h);
  expect_refused([&] { (void)writes(h); },
                 "is an output of this traced function's previous replay");
}

// Outputs are trimmed only on an axis that carries the padded one: a pooled output keeps its
// shape (it was (2, 0) or (2, 2) before masking), a sequence output is cut back.
TEST(Bucket, OnlyOutputsCarryingThePaddedAxisAreTrimmed) {
  manual_seed(7);
  nn::Sequential model;
  model.add<nn::Conv1D>(4, 3);
  model.add<nn::GlobalAveragePooling1D>();
  model.add<nn::Dense>(4);
  model.build({2, 12, 3});
  nn::Conv1D conv(5, 3, {.strides = 2});
  conv.build({2, 12, 3});
  auto f = trace([&](const Tensor& x) { return std::make_pair(model(x), conv(x)); },
                 {.shapes = ShapePolicy::bucket(1, {16, 32})});
  for (int64_t len : {12, 14, 31}) {
    const Tensor x = rand32({2, len, 3}, static_cast<uint64_t>(len));
    const auto [pooled, seq] = f(x);
    EXPECT_EQ(pooled.shape(), (Shape{2, 4}));
    EXPECT_EQ(seq.shape(), conv(x).shape());
    EXPECT_LT(test::max_abs_diff(pooled, model(x)), 1e-5);
  }
}

}  // namespace
}  // namespace encore
