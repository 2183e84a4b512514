// What the rows and tables share: attribute types that say which op they belong to, the
// activation table every activation path derives from, and the rows the registry picks by what
// they are (the fused recurrences) rather than by name.
#include "graph/trace.h"
#include "helpers.h"
#include "ops/activation.h"
#include "ops/registry.h"

namespace encore {
namespace {

// Two attribute structs of one name (mask_sequence's and lstm_sequence's were both
// SequenceAttrs) are one type to the linker: attrs_of<SequenceAttrs> was merged, and one op's
// attributes printed and compared as the other's (mask_sequence's fill value was never compared).
TEST(Rows, AttributesPrintAsTheirOwnOp) {
  auto f = trace(
      [](const Tensor& x, const Tensor& length, const Tensor& r) {
        return lstm_sequence(mask_sequence(x, length, 1, -5.0), r, Activation::Tanh,
                             Activation::Sigmoid, true);
      },
      {.name = "f", .arg_names = {"x", "length", "r"}});
  f(test::rand32({2, 3, 8}), full({1}, 2, DType::Int64), test::rand32({2, 8}));
  const std::string text = f.function().last_plan()->graph().str();
  EXPECT_NE(text.find("axis=1, value=-5"), std::string::npos) << text;
  EXPECT_NE(text.find("activation=tanh, recurrent_activation=sigmoid, reverse=1"),
            std::string::npos)
      << text;
}

// The tensor op of each activation computes what the kernels' element function does, and the
// gradient from the output is the derivative where an activation has one.
TEST(Rows, ActivationTableAgreesWithItself) {
  const Tensor x = test::rand64({64}, 3) * 4.0;
  const std::vector<double> xs = x.to_vector<double>();
  for (int i = 0; i < kNumActivations; ++i) {
    const Activation a = static_cast<Activation>(i);
    EXPECT_EQ(parse_activation(std::string(name(a))), a);
    visit_activation(a, [&](auto act) {
      EXPECT_EQ(fusable_activation(a), act.grad_from_output) << act.name;
      if (!act.elementwise) {
        EXPECT_THROW(require_elementwise(a, "test"), ValueError);
        return;
      }
      const std::vector<double> ys = activation(x, a).to_vector<double>();
      for (size_t k = 0; k < xs.size(); ++k) {
        EXPECT_NEAR(ys[k], fn::activate(a, xs[k]), 1e-12) << act.name << " at " << xs[k];
        if constexpr (decltype(act)::grad_from_output) {
          EXPECT_NEAR(act.output_grad(1.0, ys[k]), fn::activate_grad(a, xs[k], ys[k]), 1e-12)
              << act.name;
        }
      }
    });
  }
  test::expect_throw_message<ValueError>(
      [] { parse_activation("swish"); },
      "(expected linear, tanh, sigmoid, relu, hard_sigmoid, gelu or softmax)");
}

// The recurrent layers ask the registry for the fused op of their cell on their device.
TEST(Rows, FusedRecurrencesAreFoundByCellAndDevice) {
  const OpDef* lstm = fused_recurrence_op(RecurrentCell::Lstm, DeviceType::CPU);
  const OpDef* gru = fused_recurrence_op(RecurrentCell::Gru, DeviceType::CPU);
  ASSERT_TRUE(lstm && gru);
  EXPECT_STREQ(lstm->name, "onednn_lstm");
  EXPECT_STREQ(gru->name, "onednn_gru");
  const OpDef* cuda = fused_recurrence_op(RecurrentCell::Lstm, DeviceType::CUDA);
  // The plugin defines it where it loads.
  EXPECT_EQ(cuda != nullptr, find_op("cudnn_lstm") != nullptr);
  if (cuda) {
    EXPECT_STREQ(cuda->name, "cudnn_lstm");
  }
  EXPECT_EQ(fused_recurrence_op(RecurrentCell::None, DeviceType::CPU), nullptr);
}

}  // namespace
}  // namespace encore
