// Tensor core: creation, views without copies, contiguity, copies, values, printing.
#include "core/ledger.h"
#include "helpers.h"

namespace encore {
namespace {

using test::expect_values;

TEST(Tensor, CreationShapesAndDtypes) {
  const Tensor z = zeros({2, 3});
  EXPECT_EQ(z.shape(), (Shape{2, 3}));
  EXPECT_EQ(z.dtype(), DType::Float32);
  EXPECT_EQ(z.strides(), (Strides{3, 1}));
  expect_values(z, {0, 0, 0, 0, 0, 0});
  expect_values(ones({2}, DType::Int64), {1, 1});
  expect_values(full({3}, 2.5, DType::Float64), {2.5, 2.5, 2.5});
  expect_values(arange(0, 5), {0, 1, 2, 3, 4});
  expect_values(arange(1, 2, 0.25, DType::Float64), {1, 1.25, 1.5, 1.75});
  expect_values(arange(5, 0, -2, DType::Int32), {5, 3, 1});
  const Tensor t = from_vector<int32_t>({1, 2, 3, 4, 5, 6}, {3, 2});
  EXPECT_EQ(t.dtype(), DType::Int32);
  EXPECT_EQ(t.to_vector<int32_t>(), (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(zeros({}).numel(), 1);
  EXPECT_EQ(zeros({0, 4}).numel(), 0);
}

TEST(Tensor, SeededRandomIsReproducibleAndDistributed) {
  Generator a(42), b(42), c(43);
  const Tensor x = uniform({1000}, -1, 1, DType::Float32, Device::cpu(), &a);
  EXPECT_TRUE(test::bitwise_equal(x, uniform({1000}, -1, 1, DType::Float32, Device::cpu(), &b)));
  EXPECT_FALSE(test::bitwise_equal(x, uniform({1000}, -1, 1, DType::Float32, Device::cpu(), &c)));
  // A second draw from the same generator continues the stream.
  EXPECT_FALSE(test::bitwise_equal(x, uniform({1000}, -1, 1, DType::Float32, Device::cpu(), &a)));
  EXPECT_EQ(a.offset(), 2 * 250u);
  EXPECT_LT(max(x).item(), 1.0);
  EXPECT_GE(-max(neg(x)).item(), -1.0);
  EXPECT_NEAR(mean(x).item(), 0.0, 0.1);
  Generator g(7);
  const Tensor n = normal({20000}, 2.0, 3.0, DType::Float64, Device::cpu(), &g);
  EXPECT_NEAR(mean(n).item(), 2.0, 0.1);
  const Tensor d = n - 2.0;
  EXPECT_NEAR(std::sqrt(mean(d * d).item()), 3.0, 0.1);
}

TEST(Tensor, ViewsShareStorage) {
  const Tensor x = arange(0, 24).reshape({2, 3, 4});
  EXPECT_EQ(x.shape(), (Shape{2, 3, 4}));
  const Tensor t = x.transpose(0, 2);
  EXPECT_EQ(t.shape(), (Shape{4, 3, 2}));
  EXPECT_EQ(t.storage(), x.storage());
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.strides(), (Strides{1, 4, 12}));
  const Tensor p = x.permute({1, 2, 0});
  EXPECT_EQ(p.shape(), (Shape{3, 4, 2}));
  expect_values(p.slice(0, 0, 1).slice(1, 0, 1).reshape({2}), {0, 12});
  const Tensor s = x.slice(2, 1, 4, 2);  // columns 1 and 3
  EXPECT_EQ(s.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(s.storage(), x.storage());
  expect_values(s.slice(0, 1, 2).slice(1, 2, 3).reshape({2}), {21, 23});
  const Tensor e = from_vector<float>({1, 2, 3}, {3, 1}).expand({3, 4});
  EXPECT_EQ(e.strides(), (Strides{1, 0}));
  expect_values(e.contiguous(), {1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3});
  EXPECT_EQ(x.reshape({6, -1}).shape(), (Shape{6, 4}));
  EXPECT_EQ(x.reshape({6, 4}).storage(), x.storage());
  EXPECT_EQ(x.unsqueeze(1).shape(), (Shape{2, 1, 3, 4}));
  EXPECT_EQ(x.unsqueeze(-1).shape(), (Shape{2, 3, 4, 1}));
  EXPECT_EQ(x.unsqueeze(1).squeeze(1).shape(), x.shape());
  EXPECT_EQ(x.flatten(1).shape(), (Shape{2, 12}));
  EXPECT_EQ(x.slice(1, -2, 100).shape(), (Shape{2, 2, 4}));
}

TEST(Tensor, ReshapeOfNonViewableCopies) {
  const Tensor x = arange(0, 6).reshape({2, 3});
  const Tensor t = x.transpose(0, 1);  // (3, 2), not contiguous
  const Tensor r = t.reshape({6});
  EXPECT_NE(r.storage(), x.storage());
  expect_values(r, {0, 3, 1, 4, 2, 5});
  // A slice along the outer axis stays viewable.
  const Tensor s = arange(0, 12).reshape({4, 3}).slice(0, 1, 3);
  EXPECT_EQ(s.reshape({6}).storage(), s.storage());
  expect_values(s.reshape({3, 2}), {3, 4, 5, 6, 7, 8});
}

TEST(Tensor, ContiguousCloneAndCopies) {
  const Tensor x = arange(0, 6).reshape({2, 3});
  EXPECT_EQ(x.contiguous().storage(), x.storage());
  const Tensor c = x.transpose(0, 1).contiguous();
  EXPECT_TRUE(c.is_contiguous());
  expect_values(c, {0, 3, 1, 4, 2, 5});
  Tensor y = zeros({2, 3});
  y.copy_(from_vector<float>({1, 2, 3}, {3}));  // broadcast copy
  expect_values(y, {1, 2, 3, 1, 2, 3});
  y.slice(1, 1, 2).fill_(9);
  expect_values(y, {1, 9, 3, 1, 9, 3});
  Tensor d = zeros({2, 3}, DType::Float64);
  d.copy_(x);  // dtype converted
  expect_values(d, {0, 1, 2, 3, 4, 5});
  expect_values(x.to(DType::Int32), {0, 1, 2, 3, 4, 5});
  expect_values(from_vector<double>({1.7, -1.7}, {2}).to(DType::Int64), {1, -1});
}

// An in-place op whose source overlaps its destination in another layout reads the source as
// it was: m.copy_(m.T) wrote rows it then read back ([[0,3,6],[3,4,7],[6,7,8]]). Eager and
// traced alike; the identical view and disjoint parts of one storage are not copied.
TEST(Tensor, InPlaceFromAnOverlappingViewReadsTheOldValues) {
  auto transposed = [](Tensor m) { return m.copy_(m.transpose(0, 1)); };
  auto shifted = [](Tensor v) { return v.slice(0, 1, 6).add_(v.slice(0, 0, 5)); };
  auto flipped = [](Tensor v) { return v.copy_(flip(v, 0)); };
  const std::vector<double> t = {0, 3, 6, 1, 4, 7, 2, 5, 8}, s = {0, 1, 3, 5, 7, 9},
                            f = {5, 4, 3, 2, 1, 0};
  expect_values(transposed(arange(0, 9).reshape({3, 3})), t);
  Tensor v = arange(0, 6);
  shifted(v);
  expect_values(v, s);
  expect_values(flipped(arange(0, 6)), f);
  auto traced = trace([&](const Tensor& m, const Tensor& w, const Tensor& u) {
    Tensor a = m * 1.0, b = w * 1.0, c = u * 1.0;
    transposed(a);
    shifted(b);
    flipped(c);
    return std::vector<Tensor>{a, b, c};
  });
  for (int call = 0; call < 2; ++call) {
    const auto out = traced(arange(0, 9).reshape({3, 3}), arange(0, 6), arange(0, 6));
    expect_values(out[0], t);
    expect_values(out[1], s);
    expect_values(out[2], f);
  }
  Tensor same = arange(0, 4);
  same.add_(same);  // the same view: elementwise, no copy needed
  expect_values(same, {0, 2, 4, 6});
  const Tensor halves = arange(0, 6), low = halves.slice(0, 0, 3), high = halves.slice(0, 3, 6);
  const int64_t ops = Ledger::global().get(Counter::OpsDispatched);
  Tensor(low).copy_(high);  // disjoint parts: no copy
  EXPECT_EQ(Ledger::global().get(Counter::OpsDispatched) - ops, 1) << "copy_ alone";
  expect_values(halves, {3, 4, 5, 3, 4, 5});
}

TEST(Tensor, InPlaceBumpsStorageVersion) {
  Tensor x = zeros({3});
  const uint32_t v = x.storage()->version();
  x.fill_(1);
  EXPECT_EQ(x.storage()->version(), v + 1);
}

TEST(Tensor, ItemAndToVector) {
  EXPECT_DOUBLE_EQ(full({1, 1}, 3.5).item(), 3.5);
  EXPECT_THROW(zeros({2}).item(), ValueError);
  EXPECT_EQ(arange(0, 3, 1, DType::Int64).to_vector<double>(), (std::vector<double>{0, 1, 2}));
}

TEST(Tensor, SetDataReplacesStorageKeepsIdentity) {
  Tensor p = zeros({2});
  const Tensor alias = p;
  p.set_data(ones({2}));
  expect_values(alias, {1, 1});
  EXPECT_THROW(p.set_data(ones({3})), ShapeError);
  p.set_data(full({2}, 2.0, DType::Float64));
  EXPECT_EQ(alias.dtype(), DType::Float64);
}

TEST(Tensor, Printing) {
  EXPECT_EQ(from_vector<float>({1, 2, 3, 4}, {2, 2}).str(),
            "tensor([[1., 2.],\n        [3., 4.]], dtype=float32)");
  EXPECT_EQ(from_vector<int64_t>({7}, {1}).str(), "tensor([7], dtype=int64)");
  EXPECT_NE(arange(0, 5000).str().find("..."), std::string::npos);
  EXPECT_EQ(describe(zeros({32, 140, 30})), "(32, 140, 30) float32 on cpu");
  EXPECT_EQ(Tensor().str(), "tensor(undefined)");
}

TEST(Tensor, DeviceParsing) {
  EXPECT_EQ(parse_device("cpu"), Device::cpu());
  EXPECT_EQ(parse_device("cuda:1"), Device::cuda(1));
  EXPECT_THROW(parse_device("tpu"), DeviceError);
}

}  // namespace
}  // namespace encore
