// The layer table: every layer row (nn/layer.h) from its example. The layer is made through its
// row's signature, as Python makes it; a training step on the example input (forward, a sum of
// squares, backward) gives bitwise the same output and gradients eagerly and replayed. The
// options' defaults read back from the text that the stubs and docs show, and docs/LAYERS.md is
// what the rows say (ENCORE_UPDATE_DOCS=1 rewrites it).
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "helpers.h"
#include "nn/layers.h"
#include "nn/lstm.h"

namespace encore {
namespace {

using nn::LayerDef;

constexpr uint64_t kSeed = 77;

std::vector<std::string> layer_names() {
  std::vector<std::string> names;
  for (const LayerDef* def : nn::all_layers()) names.push_back(def->name);
  return names;
}

TEST(LayerTable, EveryLayerHasARow) {
  const std::vector<std::string> names = layer_names();
  for (const char* layer :
       {"Dense", "Conv1D", "LSTM", "GRU", "Bidirectional", "Dropout", "MaxPooling1D",
        "AveragePooling1D", "GlobalAveragePooling1D", "GlobalMaxPooling1D", "BatchNormalization",
        "LayerNormalization", "Embedding", "Activation", "Flatten"})
    EXPECT_NE(std::find(names.begin(), names.end(), layer), names.end()) << layer << " has no row";
}

// Literal values (what defaults hold) are equal.
bool same_literal(const ArgValue& a, const ArgValue& b) {
  if (a.index() != b.index()) return false;
  if (const auto* i = std::get_if<int64_t>(&a)) return *i == std::get<int64_t>(b);
  if (const auto* d = std::get_if<double>(&a)) return *d == std::get<double>(b);
  if (const auto* v = std::get_if<bool>(&a)) return *v == std::get<bool>(b);
  if (const auto* s = std::get_if<std::string>(&a)) return *s == std::get<std::string>(b);
  return std::holds_alternative<std::monostate>(a);
}

// What the stubs, docstrings and docs show as a default is the default.
TEST(LayerTable, DefaultsReadBackFromTheirText) {
  for (const LayerDef* def : nn::all_layers())
    for (const nn::OptionField& f : nn::layer_options(*def)) {
      const auto parsed = parse_keyword_literals(f.param.name + "=" + f.param.default_text);
      ASSERT_EQ(parsed.size(), 1u) << def->name << "." << f.param.name;
      EXPECT_TRUE(same_literal(parsed[0].second, *f.param.default_value))
          << def->name << "." << f.param.name << " shows " << f.param.default_text;
      EXPECT_NE(std::string(f.doc), "") << def->name << "." << f.param.name << " has no doc";
    }
}

TEST(LayerTable, OptionsComeFromTheirList) {
  const nn::Conv1DOptions defaults;
  const Signature& s = nn::layer_signature(nn::layer_def("Conv1D"));
  EXPECT_EQ(s.str(),
            "Conv1D(filters: int, kernel_size: int, strides: int = 1, padding: str = 'valid', "
            "dilation_rate: int = 1, "
            "activation: str = 'linear', use_bias: bool = True)");
  // Arguments bound by name fill the struct; the rest keep the struct's defaults.
  const CallArgs a =
      CallArgs::bind(s, {}, parse_keyword_literals("filters=2, kernel_size=3, padding='same'"));
  const nn::Conv1DOptions o = nn::options_of<nn::Conv1DOptions>(a);
  EXPECT_EQ(o.padding, "same");
  EXPECT_EQ(o.strides, defaults.strides);
  EXPECT_TRUE(o == (nn::Conv1DOptions{.padding = "same"}));
  // An enum option takes its names, and says which when it gets another.
  const Signature& lstm = nn::layer_signature(nn::layer_def("LSTM"));
  EXPECT_NE(lstm.str().find("implementation: str = 'auto'"), std::string::npos) << lstm.str();
  test::expect_throw_message<ValueError>(
      [&] {
        nn::options_of<nn::LSTMOptions>(
            CallArgs::bind(lstm, {}, parse_keyword_literals("units=2, implementation='x'")));
      },
      "[lstm] implementation must be one of 'auto', 'composed', 'cudnn', got 'x'");
  EXPECT_EQ(
      nn::options_of<nn::LSTMOptions>(
          CallArgs::bind(lstm, {}, parse_keyword_literals("units=2, implementation='composed'")))
          .implementation,
      nn::RecurrentImplementation::Composed);
}

class LayerTable : public ::testing::TestWithParam<std::string> {};

void clear_grads(const nn::Module& layer) {
  for (Tensor p : layer.parameters()) p.set_grad(Tensor());
}

std::vector<Tensor> grads(const nn::Module& layer) {
  std::vector<Tensor> g;
  for (const Tensor& p : layer.parameters()) g.push_back(p.grad().clone());
  return g;
}

TEST_P(LayerTable, EagerAndReplayedStepsAgree) {
  const LayerDef& def = nn::layer_def(GetParam());
  manual_seed(kSeed);
  const nn::LayerPtr layer = nn::make_example_layer(def);
  const Tensor x = nn::layer_example_input(def, DType::Float32, Device::cpu());
  auto step = [&](const Tensor& in) {
    const Tensor y = (*layer)(in);
    if (!layer->parameters().empty()) sum(y * y).backward();
    return y;
  };
  manual_seed(kSeed);
  const Tensor eager = step(x);
  const std::vector<Tensor> eager_grads = grads(*layer);
  auto traced = trace(step, {.name = def.name});
  for (int call = 0; call < 2; ++call) {  // the call that traces, then a replay
    clear_grads(*layer);
    manual_seed(kSeed);
    const Tensor y = traced(x);
    EXPECT_TRUE(test::bitwise_equal(y, eager)) << def.name << " call " << call;
    const std::vector<Tensor> g = grads(*layer);
    ASSERT_EQ(g.size(), eager_grads.size());
    for (size_t i = 0; i < g.size(); ++i)
      EXPECT_TRUE(test::bitwise_equal(g[i], eager_grads[i]))
          << def.name << " gradient " << i << " call " << call;
  }
  EXPECT_EQ(traced.stats().traces, 1);
}

INSTANTIATE_TEST_SUITE_P(Rows, LayerTable, ::testing::ValuesIn(layer_names()),
                         [](const auto& info) { return info.param; });

// docs/LAYERS.md: every layer with its signature, what it does and its options.
std::string layers_markdown() {
  std::ostringstream md;
  md << "# Layers\n\n"
     << "Generated from the layer rows (`nn/layer.h`) by `tests/cpp/test_layer_table.cpp`: run\n"
     << "`ENCORE_UPDATE_DOCS=1 build/tests/encore_tests --gtest_filter=LayerTable.Docs*` after "
        "changing a row.\n"
     << "C++ takes the required arguments, then the options struct (`Conv1D(16, 3, {.padding = "
        "\"same\"})`);\n"
     << "Python takes the same names as arguments (`nn.Conv1D(16, 3, padding=\"same\")`).\n";
  std::vector<const LayerDef*> rows(nn::all_layers().begin(), nn::all_layers().end());
  std::sort(rows.begin(), rows.end(), [](const LayerDef* a, const LayerDef* b) {
    return std::string_view(a->name) < b->name;
  });
  for (const LayerDef* def : rows) {
    md << "\n## " << def->name << "\n\n```python\n"
       << nn::layer_signature(*def).str() << "\n```\n\n"
       << def->doc << "\n";
    const std::span<const nn::OptionField> options = nn::layer_options(*def);
    if (!options.empty()) md << "\n| option | default | |\n| --- | --- | --- |\n";
    for (const nn::OptionField& f : options)
      md << "| `" << f.param.name << "` | `" << f.param.default_text << "` | " << f.doc << " |\n";
  }
  return md.str();
}

TEST(LayerTable, DocsListEveryRow) {
  const std::string path = std::string(ENCORE_SOURCE_DIR) + "/docs/LAYERS.md";
  const std::string expected = layers_markdown();
  if (const char* update = std::getenv("ENCORE_UPDATE_DOCS");
      update && std::string(update) == "1") {
    std::ofstream(path) << expected;
    return;
  }
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), expected)
      << "docs/LAYERS.md is not what the layer rows say: run "
         "ENCORE_UPDATE_DOCS=1 build/tests/encore_tests --gtest_filter=LayerTable.Docs*";
}

}  // namespace
}  // namespace encore
