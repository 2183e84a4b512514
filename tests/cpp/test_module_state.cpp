// The conventions users bring from Keras and PyTorch on every Module: summary (Keras),
// state_dict / load_state_dict and zero_grad (PyTorch), get_weights / set_weights (Keras).
#include "helpers.h"
#include "nn/checkpoint.h"
#include "nn/layers.h"
#include "nn/normalization.h"

namespace encore {
namespace {

std::shared_ptr<nn::Sequential> conv_bn_dense() {
  manual_seed(0);
  auto model = std::make_shared<nn::Sequential>();
  model->add<nn::Conv1D>(4, 3);
  model->add<nn::BatchNormalization>();
  model->add<nn::GlobalAveragePooling1D>();
  model->add<nn::Dense>(2);
  return model;
}

TEST(ModuleSummary, BuiltModelWithoutInputShapeAndTotals) {
  auto model = conv_bn_dense();
  EXPECT_THROW(
      {
        try {
          (void)model->summary();
        } catch (const ValueError& e) {
          EXPECT_NE(std::string(e.what()).find("[sequential] summary needs a built model"),
                    std::string::npos);
          throw;
        }
      },
      ValueError);
  model->build({8, 10, 3});
  const std::string s = model->summary();
  // conv 3*3*4+4 = 40; batch norm gamma, beta (8 trainable) and moving stats (8 not); dense 4*2+2
  // = 10.
  EXPECT_NE(s.find("Model: \"sequential\""), std::string::npos) << s;
  EXPECT_NE(s.find("conv1d (conv1d)"), std::string::npos) << s;
  EXPECT_NE(s.find("(None, 8, 4)"), std::string::npos) << s;
  EXPECT_NE(s.find("(None, 2)"), std::string::npos) << s;
  EXPECT_NE(s.find("Total params: 66\n"), std::string::npos) << s;
  EXPECT_NE(s.find("Trainable params: 58\n"), std::string::npos) << s;
  EXPECT_NE(s.find("Non-trainable params: 8\n"), std::string::npos) << s;
}

TEST(ModuleState, StateDictSharesStorageAndLoadsAllOrNothing) {
  auto model = conv_bn_dense();
  model->build({8, 10, 3});
  const nn::NamedTensors state = model->state_dict();
  ASSERT_EQ(state.size(), model->named_weights().size());
  EXPECT_EQ(state[0].first, "conv1d.kernel");
  EXPECT_FALSE(state[0].second.requires_grad());
  EXPECT_EQ(state[0].second.data_ptr(), model->named_weights()[0].second.data_ptr());

  auto other = conv_bn_dense();
  manual_seed(5);
  other->build({8, 10, 3});
  const Tensor kernel = other->named_weights()[0].second;
  const void* storage = kernel.data_ptr();
  EXPECT_GT(test::max_abs_diff(kernel, state[0].second), 0.0);
  // A wrong shape anywhere changes nothing.
  nn::NamedTensors bad = state;
  bad.back().second = zeros({3});
  EXPECT_THROW(other->load_state_dict(bad), ShapeError);
  EXPECT_GT(test::max_abs_diff(kernel, state[0].second), 0.0);
  nn::NamedTensors extra = state;
  extra.emplace_back("head.kernel", zeros({2}));
  EXPECT_THROW(other->load_state_dict(extra), ValueError);
  const auto [missing, unexpected] = other->load_state_dict(extra, /*strict=*/false);
  EXPECT_TRUE(missing.empty());
  EXPECT_EQ(unexpected, std::vector<std::string>{"head.kernel"});
  EXPECT_EQ(test::max_abs_diff(kernel, state[0].second), 0.0);
  EXPECT_EQ(kernel.data_ptr(), storage);  // in place: traced steps keep replaying
  const Tensor x = normal({8, 10, 3});
  model->eval();
  other->eval();
  EXPECT_EQ(test::max_abs_diff((*model)(x), (*other)(x)), 0.0);
}

TEST(ModuleState, StateDictRoundTripsThroughSafetensors) {
  auto model = conv_bn_dense();
  model->build({8, 10, 3});
  const std::string path = testing::TempDir() + "/state_dict.safetensors";
  nn::save_tensors(path, model->state_dict());
  auto other = conv_bn_dense();
  manual_seed(7);
  other->build({8, 10, 3});
  other->load_state_dict(nn::load_tensors(path).tensors);
  for (size_t i = 0; i < model->named_weights().size(); ++i)
    EXPECT_EQ(
        test::max_abs_diff(model->named_weights()[i].second, other->named_weights()[i].second),
        0.0);
}

TEST(ModuleState, GetWeightsInKerasOrderAndSetWeights) {
  auto model = conv_bn_dense();
  model->build({8, 10, 3});
  const std::vector<Tensor> w = model->get_weights();
  // Per layer, parameters then buffers: conv kernel, bias; bn gamma, beta, moving mean, variance;
  // dense.
  std::vector<Shape> shapes;
  for (const Tensor& t : w) shapes.push_back(t.shape());
  EXPECT_EQ(shapes, (std::vector<Shape>{{3, 3, 4}, {4}, {4}, {4}, {4}, {4}, {4, 2}, {2}}));
  EXPECT_NE(w[0].data_ptr(), model->named_weights()[0].second.data_ptr());  // copies
  std::vector<Tensor> ones_like;
  for (const Tensor& t : w)
    ones_like.push_back(ones(t.shape(), DType::Float64));  // converted to float32
  model->set_weights(ones_like);
  for (const auto& [name, t] : model->named_weights())
    EXPECT_EQ(test::max_abs_diff(t, ones(t.shape())), 0.0) << name;
  EXPECT_THROW(model->set_weights({ones({3, 3, 4})}), ValueError);
  ones_like[2] = ones({5});
  EXPECT_THROW(model->set_weights(ones_like), ShapeError);
}

TEST(ModuleState, ZeroGrad) {
  auto model = conv_bn_dense();
  const Tensor x = normal({8, 10, 3});
  sum((*model)(x)).backward();
  for (const Tensor& p : model->parameters()) ASSERT_TRUE(p.grad().defined());
  model->zero_grad(/*set_to_none=*/false);
  for (const Tensor& p : model->parameters())
    EXPECT_EQ(test::max_abs_diff(p.grad(), zeros(p.shape())), 0.0);
  model->zero_grad();
  for (const Tensor& p : model->parameters()) EXPECT_FALSE(p.grad().defined());
}

}  // namespace
}  // namespace encore
