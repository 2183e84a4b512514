// compare_modes: the report's contents (never its times), state left as it was, errors.
#include "helpers.h"
#include "nn/layers.h"
#include "nn/losses.h"
#include "train/compare.h"

namespace encore {
namespace {

using test::bitwise_equal;
using test::rand32;

std::shared_ptr<nn::Sequential> per_step_model() {
  manual_seed(1);
  auto m = std::make_shared<nn::Sequential>();
  m->add<nn::Dense>(4, nn::DenseOptions{.activation = "relu"});
  m->add<nn::Dense>(1, nn::DenseOptions{.activation = "sigmoid"});
  m->build({4, 6, 3});
  return m;
}

Batch make_batch(int64_t length) {
  const Tensor x = rand32({4, length, 3}, static_cast<uint64_t>(length));
  return {x, gt(x.slice(2, 0, 1), 0.0)};  // a label per step
}

TEST(CompareModes, ModelFormReportsEveryModeAndRestoresTheState) {
  auto model = per_step_model();
  nn::Adam adam(model->parameters(), 1e-2);
  std::vector<Tensor> before;
  for (const Tensor& p : model->parameters()) before.push_back(p.clone());
  const CompareReport r = compare_modes(
      *model, [](const Tensor& y, const Tensor& p) { return nn::binary_crossentropy(y, p); }, adam,
      BatchSource::of(make_batch, 6),
      {.modes = {"eager", "traced", "eager_new_length", "traced_new_length", "bucket",
                 "predict_eager", "predict_traced"},
       .steps = 3,
       .warmup = 1,
       .profile_steps = 2,
       .length_args = {0, 1},  // x and its per-step labels
       .buckets = {8, 16, 32},
       .name = "per_step"});
  ASSERT_EQ(r.modes.size(), 7u);
  const int64_t calls = 1 + 1 + 3;  // first call, warm-up, measured
  for (const ModeReport& m : r.modes) {
    SCOPED_TRACE(m.mode);
    EXPECT_EQ(m.calls, calls);
    EXPECT_EQ(static_cast<int64_t>(m.step_ms.size()), calls);
    EXPECT_GT(m.step_ms_median, 0.0);
    EXPECT_GT(m.first_call_ms, 0.0);
  }
  // The loss averages over every step: the bucketed step averages over the valid ones.
  EXPECT_TRUE(r["bucket"].error.empty()) << r["bucket"].error;
  EXPECT_GT(r["bucket"].padding_elements, 0);
  EXPECT_EQ(r["eager"].traces, 0);
  EXPECT_EQ(r["traced"].traces, 1);
  EXPECT_EQ(r["traced_new_length"].traces, calls);  // a new length every call
  EXPECT_EQ(r["predict_traced"].traces, 1);
  EXPECT_EQ(r["traced"].baseline, "eager");
  EXPECT_EQ(r["traced_new_length"].baseline, "eager_new_length");
  EXPECT_NE(r["traced"].break_even_step, 0);
  EXPECT_GT(r["traced"].arena_bytes, 0);
  EXPECT_GT(r["eager"].peak_bytes, 0);  // an eager step allocates its intermediates
  EXPECT_TRUE(std::isfinite(r["traced"].kernel_ms));
  EXPECT_TRUE(std::isnan(r["traced_new_length"].kernel_ms));  // not measured for variable lengths
  // Structured records: every retrace of the new-length mode names x's axis 1.
  const auto& records = r["traced_new_length"].records;
  ASSERT_EQ(static_cast<int64_t>(records.size()), calls);
  EXPECT_EQ(records[0].causes.at(0).kind, RetraceCause::Kind::FirstCall);
  for (size_t i = 1; i < records.size(); ++i) {
    ASSERT_FALSE(records[i].causes.empty());
    const RetraceCause& c = records[i].causes[0];
    EXPECT_EQ(c.kind, RetraceCause::Kind::Shape);
    EXPECT_EQ(c.arg, 0);
    EXPECT_EQ(c.arg_name, "x");
    EXPECT_EQ(c.axis, 1);
    EXPECT_EQ(std::stoll(c.new_value), std::stoll(c.old_value) + 1);
  }
  const auto& axes = r["traced_new_length"].axis_values;
  const auto x1 = std::find_if(axes.begin(), axes.end(),
                               [](const AxisValues& a) { return a.arg == 0 && a.axis == 1; });
  ASSERT_NE(x1, axes.end());
  EXPECT_EQ(static_cast<int64_t>(x1->counts.size()), calls);
  // Parameters as they were; the optimizer's slots, made during the comparison, zeroed.
  EXPECT_FALSE(r.trained);
  const auto after = model->parameters();
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(bitwise_equal(after[i], before[i])) << i;
  for (const auto& [name, t] : adam.state()) {
    if (name == "lr")
      EXPECT_EQ(t.item(), adam.lr());
    else
      EXPECT_EQ(test::max_abs_diff(t, zeros_like(t)), 0.0) << name;
  }
  // Text and JSON carry the same modes.
  const std::string table = r.table(), json = r.json();
  for (const ModeReport& m : r.modes) {
    EXPECT_NE(table.find(m.mode), std::string::npos);
    EXPECT_NE(json.find("\"mode\": \"" + m.mode + "\""), std::string::npos);
  }
  EXPECT_NE(json.find("\"kind\": \"shape\""), std::string::npos);
}

TEST(CompareModes, StepFormSaysItTrainsUnlessGivenState) {
  auto model = per_step_model();
  nn::SGD sgd(model->parameters(), 0.1);
  const Step step = [&](const Batch& b) -> std::vector<Tensor> {
    sgd.zero_grad();
    Tensor loss = nn::binary_crossentropy(b[1], (*model)(b[0]));
    loss.backward();
    sgd.step();
    return {loss};
  };
  const Tensor w = model->parameters()[0].clone();
  const CompareReport trained =
      compare_modes(step, BatchSource::of(make_batch(6)), {.steps = 2, .warmup = 0});
  EXPECT_TRUE(trained.trained);
  EXPECT_NE(trained.table().find("trained the model"), std::string::npos);
  EXPECT_FALSE(bitwise_equal(model->parameters()[0], w));
  const Tensor w2 = model->parameters()[0].clone();
  const CompareReport kept = compare_modes(step, BatchSource::of(make_batch(6)),
                                           {.steps = 2, .warmup = 0, .state = model->parameters()});
  EXPECT_FALSE(kept.trained);
  EXPECT_TRUE(bitwise_equal(model->parameters()[0], w2));
}

TEST(CompareModes, BucketingAPerStepLossIsExactAndCounted) {
  auto model = per_step_model();
  nn::Adam adam(model->parameters(), 1e-2);
  // The loss reads the first step only: padding never reaches it at any length the buckets serve
  // (a loss on the first two steps would read padding at length 1, and the probe refuses it).
  const LossFn head_loss = [](const Tensor& y, const Tensor& p) {
    return nn::binary_crossentropy(y.slice(1, 0, 1), p.slice(1, 0, 1));
  };
  const CompareReport r = compare_modes(*model, head_loss, adam, BatchSource::of(make_batch, 6),
                                        {.modes = {"eager_new_length", "bucket"},
                                         .steps = 6,
                                         .length_args = {0, 1},
                                         .buckets = {8, 16}});
  const ModeReport& b = r["bucket"];
  EXPECT_TRUE(b.error.empty()) << b.error;
  EXPECT_EQ(b.traces, 2);  // lengths 7..16: buckets 8 and 16
  EXPECT_GT(b.retraces_saved, 0);
  EXPECT_GT(b.padding_elements, 0);
  EXPECT_GT(b.real_elements, b.padding_elements);
}

TEST(CompareModes, TracesCountTheStepsOwnTracedFunctions) {
  auto model = per_step_model();
  const auto forward = [&](const std::vector<Arg>& a) {
    return std::vector<Tensor>{(*model)(std::get<Tensor>(a[0]))};
  };
  // The wrong pattern: a new traced function every call traces every call, though the mode is
  // eager.
  const Step fresh = [&](const Batch& b) {
    TracedFunction f(forward);
    return f({b[0]});
  };
  TracedFunction kept(forward);
  const Step reused = [&](const Batch& b) { return kept({b[0]}); };
  const CompareOptions o{.modes = {"eager"}, .steps = 3, .warmup = 1, .state = model->parameters()};
  const CompareReport r = compare_modes(fresh, BatchSource::of(make_batch(6)), o);
  EXPECT_EQ(r["eager"].traces, r["eager"].calls);
  EXPECT_EQ(r["eager"].calls, 5);
  // One function reused: it traced in the start-up call, before the timed calls.
  EXPECT_EQ(compare_modes(reused, BatchSource::of(make_batch(6)), o)["eager"].traces, 0);
}

// Conv1D -> pooling -> Dense: oneDNN primitives to set up for every new length.
std::shared_ptr<nn::Sequential> conv_model() {
  manual_seed(2);
  auto m = std::make_shared<nn::Sequential>();
  m->add<nn::Conv1D>(8, 3, nn::Conv1DOptions{.padding = "same", .activation = "relu"});
  m->add<nn::GlobalAveragePooling1D>();
  m->add<nn::Dense>(1, nn::DenseOptions{.activation = "sigmoid"});
  m->build({4, 6, 3});
  return m;
}

Batch make_pooled_batch(int64_t length) {
  const Tensor x = rand32({4, length, 3}, static_cast<uint64_t>(length));
  return {x, gt(x.slice(1, 0, 1).slice(2, 0, 1).squeeze(1), 0.0)};  // a label per sequence
}

CompareReport compare_in_order(const std::vector<std::string>& modes) {
  auto model = conv_model();
  nn::SGD sgd(model->parameters(), 0.1);
  const LossFn bce = [](const Tensor& y, const Tensor& p) { return nn::binary_crossentropy(y, p); };
  return compare_modes(*model, bce, sgd, BatchSource::of(make_pooled_batch, 6),
                       {.modes = modes, .steps = 3, .warmup = 0, .profile_steps = 0});
}

// Each mode pays its own per-shape setup: what it sets up and traces is what it would alone,
// whatever the other modes and their order. Every call of a new-length mode sets up the shapes
// a fixed-shape mode sets up once (the fixed mode's first call: its per-shape state is its own,
// so it never sets them up again).
TEST(CompareModes, SetupsAndTracesPerModeDoNotDependOnTheOrderOfModes) {
  const std::vector<std::string> order = {"eager", "eager_new_length", "traced_new_length",
                                          "traced"};
  std::vector<std::string> reversed(order.rbegin(), order.rend());
  const CompareReport a = compare_in_order(order), b = compare_in_order(reversed);
  for (const std::string& mode : order) {
    SCOPED_TRACE(mode);
    EXPECT_EQ(a[mode].setups, b[mode].setups);
    EXPECT_EQ(a[mode].traces, b[mode].traces);
    EXPECT_EQ(a[mode].calls, 4);
  }
  const int64_t per_shape = a["eager"].setups;
  EXPECT_GT(per_shape, 0) << "the convolution's forward and weight-gradient primitives";
  EXPECT_EQ(a["eager_new_length"].setups, per_shape * a["eager_new_length"].calls);
  EXPECT_GT(a["traced"].setups, 0);
  EXPECT_EQ(a["traced_new_length"].setups, a["traced"].setups * a["traced_new_length"].calls);
  EXPECT_EQ(a["traced_new_length"].traces, a["traced_new_length"].calls);
  EXPECT_EQ(a["traced"].traces, 1);
  EXPECT_EQ(a["eager"].traces, 0);
}

// The break-even step is the first call after which the mode's one-off cost plus calls x its
// median is at most its baseline's.
TEST(CompareModes, BreakEvenFollowsFromOneOffCostsAndMedians) {
  const CompareReport r =
      compare_in_order({"eager", "traced", "eager_new_length", "traced_new_length"});
  for (const auto& [t, e] :
       {std::pair{"traced", "eager"}, {"traced_new_length", "eager_new_length"}}) {
    SCOPED_TRACE(t);
    const ModeReport &tm = r[t], &em = r[e];
    const auto total = [](const ModeReport& m, int64_t n) {
      return m.one_off_ms + n * m.step_ms_median;
    };
    int64_t expected = -1;
    for (int64_t n = 1; n < 1'000'000 && expected < 0; ++n)
      if (total(tm, n) <= total(em, n)) expected = n;
    if (expected < 0 && tm.step_ms_median < em.step_ms_median)
      GTEST_SKIP() << "beyond a million calls";
    EXPECT_EQ(tm.break_even_step, expected);
  }
  // A mode whose every call traces has its tracing in its median: its one-off cost is its first
  // call's excess alone.
  const ModeReport& n = r["traced_new_length"];
  EXPECT_DOUBLE_EQ(n.one_off_ms, n.first_call_ms - n.step_ms_median);
}

TEST(CompareModes, TablesShowFewDigitsAndRestoredTensorsHaveNames) {
  auto model = per_step_model();
  nn::SGD sgd(model->parameters(), 0.1);
  const Step step = [&](const Batch& b) -> std::vector<Tensor> {
    sgd.zero_grad();
    Tensor loss = nn::binary_crossentropy(b[1], (*model)(b[0]));
    loss.backward();
    sgd.step();
    return {loss};
  };
  std::vector<Tensor> state = model->parameters();
  state.push_back(zeros({3}));  // a tensor without a name
  const CompareReport r = compare_modes(step, BatchSource::of(make_batch(6)),
                                        {.modes = {"eager", "traced"}, .steps = 2, .state = state});
  ASSERT_EQ(r.restored.size(), state.size());
  for (const std::string& name : r.restored) EXPECT_FALSE(name.empty());
  EXPECT_NE(r.restored.back().find("(3,)"), std::string::npos) << r.restored.back();
  const std::string table = r.table();
  // No exponents, and at most three significant digits after the leading zeros.
  EXPECT_EQ(table.find("e-0"), std::string::npos) << table;
  EXPECT_EQ(table.find("e+0"), std::string::npos) << table;
  for (size_t at = table.find("0.0"); at != std::string::npos; at = table.find("0.0", at + 1)) {
    size_t end = at + 2;
    while (end < table.size() && table[end] == '0') ++end;
    size_t digits = 0;
    while (end < table.size() && std::isdigit(static_cast<unsigned char>(table[end])))
      ++end, ++digits;
    EXPECT_LE(digits, 3u) << table.substr(at, end - at);
  }
}

TEST(CompareModes, UserErrorsAreNamed) {
  auto model = per_step_model();
  const Step step = [&](const Batch& b) -> std::vector<Tensor> { return {(*model)(b[0])}; };
  EXPECT_THROW(compare_modes(step, BatchSource::of(make_batch(6)), {.modes = {"fast"}}),
               ValueError);
  try {
    compare_modes(step, BatchSource::of(make_batch(6)), {.modes = {"traced_new_length"}});
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_NE(
        std::string(e.what()).find("needs a batch source that makes a batch of a given length"),
        std::string::npos);
  }
  EXPECT_THROW(compare_modes(step, BatchSource{}, {}), ValueError);
  EXPECT_THROW(compare_modes(step, BatchSource::of(make_batch(6)), {.steps = 0}), ValueError);
}

}  // namespace
}  // namespace encore
