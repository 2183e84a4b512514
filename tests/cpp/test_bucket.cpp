// Shape bucketing is exact or refused: for every built-in layer, a bucketed traced call equals
// the eager call on the unpadded input over random lengths, or the trace is rejected with an
// error naming what depends on the padding; outputs are trimmed only where they derive from
// the padded axis.
#include <random>

#include "core/modes.h"
#include "graph/trace.h"
#include "helpers.h"
#include "nn/layers.h"
#include "nn/losses.h"
#include "nn/lstm.h"
#include "nn/optim.h"

namespace encore {
namespace {

using test::rand32;

struct LayerCase {
  std::string name;
  std::function<std::shared_ptr<nn::Module>()> make;
  bool exact;
};

std::vector<LayerCase> layer_cases() {
  using nn::Conv1DOptions;
  return {
      {"dense",
       [] { return std::make_shared<nn::Dense>(5, nn::DenseOptions{.activation = "relu"}); }, true},
      {"conv1d_valid", [] { return std::make_shared<nn::Conv1D>(4, 3); }, true},
      {"conv1d_causal",
       [] { return std::make_shared<nn::Conv1D>(4, 3, Conv1DOptions{.padding = "causal"}); }, true},
      {"conv1d_dilated_causal",
       [] {
         return std::make_shared<nn::Conv1D>(
             4, 3, Conv1DOptions{.padding = "causal", .dilation_rate = 2});
       },
       true},
      {"dropout_inference", [] { return std::make_shared<nn::Dropout>(0.5); }, true},
      {"lstm_sequences",
       [] { return std::make_shared<nn::LSTM>(6, nn::LSTMOptions{.return_sequences = true}); },
       true},
      {"conv1d_same",
       [] { return std::make_shared<nn::Conv1D>(4, 3, Conv1DOptions{.padding = "same"}); }, false},
      {"conv1d_strided",
       [] { return std::make_shared<nn::Conv1D>(4, 3, Conv1DOptions{.strides = 2}); }, false},
      {"global_average_pooling", [] { return std::make_shared<nn::GlobalAveragePooling1D>(); },
       false},
      {"global_max_pooling", [] { return std::make_shared<nn::GlobalMaxPooling1D>(); }, false},
      {"max_pooling", [] { return std::make_shared<nn::MaxPooling1D>(); }, false},
      {"flatten", [] { return std::make_shared<nn::Flatten>(); }, false},
      {"lstm_last_state", [] { return std::make_shared<nn::LSTM>(6); }, false},
      {"lstm_reverse",
       [] {
         return std::make_shared<nn::LSTM>(
             6, nn::LSTMOptions{.return_sequences = true, .reverse = true});
       },
       false},
      {"bidirectional",
       [] {
         return std::make_shared<nn::Bidirectional>(
             std::make_shared<nn::LSTM>(6, nn::LSTMOptions{.return_sequences = true}));
       },
       false},
  };
}

std::vector<int64_t> random_lengths(int n, int64_t lo, int64_t hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> d(lo, hi);
  std::vector<int64_t> v;
  for (int i = 0; i < n; ++i) v.push_back(d(rng));
  return v;
}

TEST(Bucket, EveryLayerIsExactOrRefusedOverRandomLengths) {
  const TrainingGuard inference(false);
  for (const LayerCase& c : layer_cases()) {
    SCOPED_TRACE(c.name);
    manual_seed(1);
    std::shared_ptr<nn::Module> layer = c.make();
    layer->build({2, 9, 3});
    auto f = trace([&](const Tensor& x) { return (*layer)(x); },
                   {.name = c.name, .shapes = ShapePolicy::bucket(1, {12, 20, 32})});
    int refused = 0;
    // Lengths up to 32: a composed LSTM stacks one tensor per step, and variadic ops over more
    // than 32 inputs shift 32-bit masks too far (ops/op.h, autograd/engine.cpp; reported).
    for (int64_t len : random_lengths(20, 5, 32, 7)) {
      const Tensor x = rand32({2, len, 3}, static_cast<uint64_t>(len));
      const Tensor eager = (*layer)(x);
      try {
        const Tensor bucketed = f(x);
        ASSERT_EQ(bucketed.shape(), eager.shape()) << "length " << len;
        EXPECT_LT(test::max_abs_diff(bucketed, eager), 1e-5) << "length " << len;
      } catch (const ValueError& e) {
        EXPECT_NE(std::string(e.what()).find("cannot be exact"), std::string::npos) << e.what();
        ++refused;
      }
    }
    if (c.exact) {
      EXPECT_EQ(refused, 0);
      EXPECT_LE(f.stats().traces, 3);
    } else {
      EXPECT_GT(refused,
                0);  // every bucket that pads refuses; a length equal to a bucket size needs none
      EXPECT_EQ(f.function().cache_size(), 0u);
    }
  }
}

// The model: Conv1D -> GlobalAveragePooling1D -> Dense returned (2, 0), (2, 2) and
// values off by 0.34 under bucketing. Now the first bucketed trace refuses, naming the output.
TEST(Bucket, PoolingModelIsRefusedNamingTheOutput) {
  manual_seed(2);
  nn::Sequential model;
  model.add<nn::Conv1D>(4, 3);
  model.add<nn::GlobalAveragePooling1D>();
  model.add<nn::Dense>(4);
  model.build({2, 12, 3});
  auto f = trace([&](const Tensor& x) { return model(x); },
                 {.name = "pooled", .shapes = ShapePolicy::bucket(1, {16, 32})});
  const Tensor x = rand32({2, 12, 3}, 3);
  try {
    f(x);
    FAIL() << "bucketing a pooling model must be refused";
  } catch (const ValueError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("[trace] bucket(axis 1, sizes 16/32) of 'pooled' cannot be exact: output 0"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("(lengths 1 to 16 share this bucket)"), std::string::npos) << m;
  }
  // The exact policy is unaffected.
  auto g = trace([&](const Tensor& x) { return model(x); });
  EXPECT_EQ(g(x).shape(), (Shape{2, 4}));
}

// A bucket on the batch axis changed the loss silently (0.5397 eager vs 0.5972): the mean over
// the batch sees the padded rows. Training is refused, naming the parameters it would spoil.
TEST(Bucket, BatchAxisBucketOfATrainingStepIsRefused) {
  manual_seed(4);
  nn::Sequential model;
  model.add<nn::Dense>(1, nn::DenseOptions{.activation = "sigmoid"});
  model.build({5, 3});
  nn::SGD sgd(model.parameters(), 0.1);
  auto f = trace(
      [&](const Tensor& x, const Tensor& y) {
        sgd.zero_grad();
        Tensor loss = nn::binary_crossentropy(y, model(x));
        loss.backward();
        sgd.step();
        return loss;
      },
      {.name = "step", .shapes = ShapePolicy::bucket(0, {8}, {0, 1}), .arg_names = {"x", "y"}});
  const Tensor x = rand32({5, 3}, 5), y = gt(rand32({5, 1}, 6), 0.0);
  try {
    f(x, y);
    FAIL() << "a batch-axis bucket of a mean loss must be refused";
  } catch (const ValueError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("'dense.kernel' (written by"), std::string::npos) << m;
    EXPECT_NE(m.find("padded positions of x, y along axis 0"), std::string::npos) << m;
  }
}

// Per-step training where the loss only sees real steps: a causal conv model whose loss reads
// the first steps. Bucketed training follows eager training (parameters after several steps).
TEST(Bucket, ExactTrainingStepMatchesEagerParameters) {
  auto make = [] {
    manual_seed(5);
    auto m = std::make_shared<nn::Sequential>();
    m->add<nn::Conv1D>(4, 3, nn::Conv1DOptions{.padding = "causal", .activation = "relu"});
    m->add<nn::Dense>(1);
    m->build({2, 8, 3});
    return m;
  };
  auto eager_model = make(), traced_model = make();
  nn::Adam eager_opt(eager_model->parameters(), 1e-2), traced_opt(traced_model->parameters(), 1e-2);
  auto step_of = [](nn::Sequential& m, nn::Adam& opt) {
    return [&m, &opt](const Tensor& x) {
      opt.zero_grad();
      const Tensor head = m(x).slice(1, 0, 4);
      Tensor loss = mean(head * head);
      loss.backward();
      opt.step();
      return loss;
    };
  };
  auto eager_step = step_of(*eager_model, eager_opt);
  auto traced_step =
      trace(step_of(*traced_model, traced_opt), {.shapes = ShapePolicy::bucket(1, {16, 32})});
  for (int64_t len : random_lengths(20, 4, 32, 9)) {
    const Tensor x = rand32({2, len, 3}, static_cast<uint64_t>(100 + len));
    const Tensor le = eager_step(x), lt = traced_step(x);
    EXPECT_LT(test::max_abs_diff(lt, le), 1e-5) << len;
  }
  EXPECT_LE(traced_step.stats().traces, 2);
  const auto pe = eager_model->parameters(), pt = traced_model->parameters();
  for (size_t i = 0; i < pe.size(); ++i) EXPECT_LT(test::max_abs_diff(pt[i], pe[i]), 1e-4) << i;
  EXPECT_GT(traced_step.stats().padding_elements, 0);
  EXPECT_GT(traced_step.stats().real_elements, traced_step.stats().padding_elements);
}

}  // namespace
}  // namespace encore
