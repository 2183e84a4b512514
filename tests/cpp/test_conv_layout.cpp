// The CPU convolutions' activation layout: 'blocked' lets oneDNN's implementation pick its own
// layout and converts the activations around each convolution; results match the native
// layout's, and the conversions are counted.
#include "core/ledger.h"
#include "helpers.h"
#include "ops/conv.h"

namespace encore {
namespace {

struct LayoutGuard {
  ~LayoutGuard() { set_conv1d_layout(Conv1dLayout::Native); }
};

std::vector<Tensor> conv_step() {
  Tensor x = test::rand32({4, 48, 64}, 2).set_requires_grad(), w = test::rand32({12, 64, 64}, 1).set_requires_grad();
  Tensor y = conv1d(x, w, 1, Padding::same());
  sum(y * y).backward();
  return {y.detach(), x.grad(), w.grad()};
}

TEST(Conv1dLayout, BlockedConvertsAroundEachConvolutionAndMatchesNative) {
  LayoutGuard guard;
  EXPECT_EQ(conv1d_layout(), Conv1dLayout::Native);
  Ledger& ledger = Ledger::global();
  const int64_t native_reorders = ledger.get(Counter::LayoutReorders);
  const std::vector<Tensor> native = conv_step();
  EXPECT_EQ(ledger.get(Counter::LayoutReorders), native_reorders);  // nwc is never converted
  set_conv1d_layout(Conv1dLayout::Blocked);
  const int64_t before = ledger.get(Counter::LayoutReorders);
  const std::vector<Tensor> blocked = conv_step();
  // Forward: x in, y out; backward data: gy in, gx out; backward filter: x and gy in.
  EXPECT_EQ(ledger.get(Counter::LayoutReorders) - before, 6);
  bool named = false;
  for (const ConvPrimitiveInfo& p : conv1d_primitives())
    named |= p.key.ends_with(" blocked") && p.impl.find("(activations in its layout)") != std::string::npos;
  EXPECT_TRUE(named);
  for (size_t i = 0; i < 3; ++i) {
    const double scale = max(abs(native[i])).item();
    EXPECT_LE(test::max_abs_diff(native[i], blocked[i]), 1e-5 * scale) << "result " << i;
  }
}

TEST(Conv1dLayout, UnknownLayoutIsAValueError) {
  EXPECT_EQ(parse_conv1d_layout("blocked"), Conv1dLayout::Blocked);
  try {
    parse_conv1d_layout("nCw16c");
    ADD_FAILURE() << "accepted";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("[conv1d] unknown layout 'nCw16c'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace encore
