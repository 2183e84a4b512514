// Every bad input gets an exception of the right type that names the op and the shapes,
// and the runtime stays usable afterwards.
#include "core/modes.h"
#include "helpers.h"
#include "nn/layers.h"
#include "nn/losses.h"
#include "nn/lstm.h"
#include "nn/optim.h"
#include "ops/conv.h"
#include "ops/dispatch.h"

namespace encore {
namespace {

template <class E, class F> std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
    return {};
  }
  ADD_FAILURE() << "no exception";
  return {};
}

// A tensor on cuda:0 without a GPU, for the checks that run before any kernel: its memory is
// never touched.
Tensor claims_cuda(const Shape& shape) {
  return Tensor::make_view(Storage::wrap(nullptr, 0, Device::cuda(), nullptr), shape,
                           contiguous_strides(shape), 0, DType::Float32);
}

#define EXPECT_ERROR(Kind, expr, fragment)                                  \
  do {                                                                      \
    const std::string msg = message_of<Kind>([&] { (void)(expr); });        \
    EXPECT_NE(msg.find(fragment), std::string::npos) << "message: " << msg; \
  } while (0)

TEST(Errors, ShapesDtypesAndValues) {
  const Tensor a = zeros({2, 3}), b = zeros({4});
  EXPECT_ERROR(ShapeError, a + b, "[add] shapes (2, 3) and (4,) cannot be broadcast together");
  EXPECT_ERROR(DTypeError, a + zeros({2, 3}, DType::Float64), "[add] dtypes differ");
  EXPECT_ERROR(DTypeError, exp(zeros({2}, DType::Int32)), "[exp] needs a floating tensor");
  EXPECT_ERROR(ShapeError, matmul(zeros({2, 3}), zeros({4, 5})), "[matmul] (2, 3) @ (4, 5)");
  EXPECT_ERROR(ShapeError, matmul(zeros({}), zeros({2})), "[matmul]");
  EXPECT_ERROR(
      ShapeError, conv1d(zeros({32, 140, 30}), zeros({40, 16, 128})),
      "[conv1d] input (32, 140, 30) has 30 channels but the kernel (40, 16, 128) expects 16");
  EXPECT_ERROR(ShapeError, conv1d(zeros({1, 3, 2}), zeros({5, 2, 1})),
               "too short for kernel size 5");
  EXPECT_ERROR(ShapeError, conv1d(zeros({3, 2}), zeros({5, 2, 1})), "[conv1d] expects input");
  EXPECT_ERROR(ValueError, conv1d(zeros({1, 8, 2}), zeros({3, 2, 1}), 0), "[conv1d] stride 0");
  EXPECT_ERROR(ShapeError, a.reshape({4, 2}), "[reshape] cannot reshape (2, 3)");
  EXPECT_ERROR(ShapeError, a.reshape({-1, -1}), "only one dimension may be -1");
  EXPECT_ERROR(ShapeError, sum(a, {2}), "[sum] axis 2 is out of range for a tensor of rank 2");
  EXPECT_ERROR(ValueError, sum(a, {1, -1}), "listed twice");
  EXPECT_ERROR(ValueError, a.slice(0, 0, 1, 0), "[slice] step must be positive");
  EXPECT_ERROR(ShapeError, a.squeeze(0), "[squeeze] axis 0 of (2, 3) has size 2");
  EXPECT_ERROR(ValueError, dropout(a, 1.0, true), "[dropout] rate must be in [0, 1)");
  EXPECT_ERROR(ValueError, a.item(), "[item] needs a tensor with one element");
  EXPECT_ERROR(ShapeError, concat({zeros({2, 3}), zeros({3, 3})}, 1), "[concat] input 1 (3, 3)");
  EXPECT_ERROR(ValueError, gather_last(zeros({2, 3}), from_vector<int32_t>({0, 3}, {2})),
               "[gather_last] index 3 is out of range");
  EXPECT_ERROR(DTypeError, gather_last(zeros({2, 3}), zeros({2})),
               "indices must be int32 or int64");
  EXPECT_ERROR(ShapeError, zeros({1, 1, 1, 1, 1, 1, 1, 1, 1}), "rank 9 exceeds the maximum of 8");
  EXPECT_ERROR(ShapeError, zeros({-1}), "negative dimension");
  EXPECT_ERROR(ValueError, add(Tensor(), a), "[add] input 0 is an undefined tensor");
  EXPECT_ERROR(ValueError, clip(a, 1, 0), "[clip] lower bound 1 exceeds upper bound 0");
  EXPECT_ERROR(ValueError, arange(0, 1, 0), "[arange]");
  EXPECT_ERROR(ShapeError, from_vector<float>({1, 2, 3}, {2, 2}),
               "3 values cannot fill shape (2, 2)");
  EXPECT_ERROR(ShapeError,
               lstm_cell(zeros({2, 7}), zeros({2, 2}), Activation::Tanh, Activation::Sigmoid),
               "[lstm_cell] gates (2, 7) must be (batch, 4 * units)");
  EXPECT_ERROR(ValueError, parse_activation("swish"), "unknown activation 'swish'");
  // The runtime still works.
  test::expect_values(ones({2}) + ones({2}), {2, 2});
}

TEST(Errors, Conv1dSizes) {
  // A kernel of size 0 is a ValueError from shape inference (it reached oneDNN before), from
  // the API function and from the op as traces and backward passes call it.
  EXPECT_ERROR(ValueError, conv1d(zeros({1, 8, 2}), zeros({0, 2, 1})),
               "[conv1d] kernel size must be >= 1, got kernel (0, 2, 1)");
  EXPECT_ERROR(
      ValueError,
      call(op("conv1d"), {zeros({1, 8, 2}), zeros({0, 2, 1})}, ConvAttrs{1, 1, 0, 0, 0, 0}),
      "[conv1d] kernel size must be >= 1, got 0");
  EXPECT_ERROR(ValueError,
               call(op("conv1d_backward_filter"), {zeros({1, 8, 2}), zeros({1, 9, 1})},
                    ConvAttrs{1, 1, 0, 0, 0, 0}),
               "[conv1d_backward_filter] kernel size must be >= 1");
  EXPECT_ERROR(
      ValueError, nn::Conv1D(4, 0),
      "[conv1d] filters, kernel_size, strides and dilation_rate must be >= 1, got 4, 0, 1 and 1");
  EXPECT_ERROR(ValueError, nn::Conv1D(0, 3), "[conv1d] filters, kernel_size");
  EXPECT_ERROR(ValueError, nn::Conv1D(-4, 3), "[conv1d] filters, kernel_size");
  EXPECT_ERROR(ValueError, nn::Conv1D(4, -3), "[conv1d] filters, kernel_size");
  EXPECT_ERROR(ValueError, nn::Conv1D(4, 3, {.strides = -1}), "[conv1d] filters, kernel_size");
  EXPECT_ERROR(ValueError, nn::Conv1D(4, 3, {.dilation_rate = 0}), "[conv1d] filters, kernel_size");
  EXPECT_ERROR(ValueError, conv1d(zeros({1, 8, 2}), zeros({3, 2, 1}), 1, Padding::explicit_(-1, 0)),
               "padding >= 0");
  // Sizes whose receptive field or padded length overflow int64.
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_ERROR(ShapeError, conv1d(zeros({1, 8, 2}), zeros({3, 2, 1}), 1, Padding::same(), kMax),
               "[conv1d] kernel size 3 with dilation 9223372036854775807 overflows int64");
  EXPECT_ERROR(ShapeError, conv1d(zeros({1, 8, 2}), zeros({3, 2, 1}), 1, Padding::same(), kMax / 2),
               "[conv1d] input length 8 with padding");
  EXPECT_ERROR(ShapeError,
               conv1d(zeros({1, 8, 2}), zeros({3, 2, 1}), 1, Padding::explicit_(kMax, 1)),
               "overflows int64");
  nn::Conv1D layer(2, 3, {.dilation_rate = kMax});
  EXPECT_ERROR(ShapeError, layer.build({1, 8, 2}), "overflows int64");
  test::expect_values(conv1d(ones({1, 3, 1}), ones({3, 1, 1})), {3});
}

TEST(Errors, Autograd) {
  Tensor w = ones({2}).set_requires_grad();
  EXPECT_ERROR(ShapeError, (w * 2.0).backward(), "[backward] implicit gradient needs a scalar");
  EXPECT_ERROR(ValueError, zeros({1}).backward(), "does not require grad");
  EXPECT_ERROR(ValueError, w.fill_(0),
               "[fill_] cannot write in place into a tensor that requires grad");
  EXPECT_ERROR(DTypeError, zeros({2}, DType::Int64).set_requires_grad(), "only floating tensors");
  EXPECT_ERROR(ValueError, (w * 2.0).set_requires_grad(), "leaf tensors");
  {
    NoGradGuard no_grad;
    w.fill_(3);  // fine without grad mode: this is how optimizers update parameters
  }
  test::expect_values(w, {3, 3});
}

TEST(Errors, BackwardGradientOfAnotherDtypeOrDevice) {
  const Tensor w = ones({2}).set_requires_grad();
  const Tensor y = w * 2.0;
  EXPECT_ERROR(DTypeError, y.backward(ones({2}, DType::Float64)),
               "[backward] gradient (2,) float64 on cpu does not match the dtype of (2,) float32");
  EXPECT_ERROR(
      DeviceError, y.backward(claims_cuda({2})),
      "[backward] gradient (2,) float32 on cuda:0 is not on the device of (2,) float32 on cpu");
  y.backward(ones({2}));
  test::expect_values(w.grad(), {2, 2});
}

TEST(Errors, OptimizerParameterListedTwice) {
  nn::Dense dense(2);
  dense.build({1, 3});
  dense.set_name("dense");
  std::vector<Tensor> params = dense.parameters();
  params.push_back(params[0]);
  EXPECT_ERROR(ValueError, nn::SGD(params, 0.1),
               "[sgd] parameter 'dense.kernel' is listed twice (positions 0 and 2)");
  EXPECT_ERROR(ValueError, nn::Adam(params, 0.1),
               "[adam] parameter 'dense.kernel' is listed twice");
  const Tensor unnamed = ones({1}).set_requires_grad();
  EXPECT_ERROR(ValueError, nn::SGD({unnamed, unnamed}, 0.1),
               "parameter (1,) float32 on cpu is listed twice");
}

TEST(Errors, LossesReportUnderTheirOwnName) {
  const Tensor p = full({3}, 0.5), y = zeros({3});
  EXPECT_ERROR(
      DTypeError, nn::binary_crossentropy(zeros({3}, DType::Int64), p),
      "[binary_crossentropy] targets (3,) int64 on cpu and predictions (3,) float32 on cpu "
      "differ in dtype");
  EXPECT_ERROR(DTypeError, nn::binary_crossentropy(y, zeros({3}, DType::Int32)),
               "[binary_crossentropy] predictions must be floating");
  EXPECT_ERROR(ShapeError, nn::binary_crossentropy(y, full({3, 1}, 0.5)),
               "[binary_crossentropy] targets (3,) and predictions (3, 1) differ in shape");
  EXPECT_ERROR(DTypeError, nn::mean_squared_error(y.to(DType::Float64), p), "[mean_squared_error]");
  EXPECT_ERROR(DTypeError, nn::binary_accuracy(y.to(DType::Float64), p), "[binary_accuracy]");
  const Tensor scores = zeros({2, 5});
  EXPECT_ERROR(DTypeError, nn::sparse_categorical_crossentropy(zeros({2}), scores),
               "[sparse_categorical_crossentropy] labels must be int32 or int64");
  EXPECT_ERROR(ShapeError, nn::sparse_categorical_crossentropy(zeros({3}, DType::Int64), scores),
               "[sparse_categorical_crossentropy] labels (3,) must have the shape of the "
               "predictions (2, 5)");
  EXPECT_ERROR(
      DTypeError,
      nn::sparse_categorical_crossentropy(zeros({2}, DType::Int64), zeros({2, 5}, DType::Int64)),
      "[sparse_categorical_crossentropy] predictions must be floating");
  for (bool from_logits : {true, false})
    EXPECT_ERROR(
        ValueError,
        nn::sparse_categorical_crossentropy(from_vector<int64_t>({1, 7}, {2}), full({2, 5}, 0.2),
                                            from_logits),
        "[sparse_categorical_crossentropy] label 7 (element 1 of labels (2,)) is out of range "
        "for 5 classes");
  EXPECT_ERROR(ValueError,
               nn::sparse_categorical_crossentropy(from_vector<int32_t>({-1, 0}, {2}), scores),
               "label -1 (element 0");
  EXPECT_ERROR(
      DeviceError, nn::binary_crossentropy(claims_cuda({3}), p),
      "[binary_crossentropy] targets (3,) float32 on cuda:0 and predictions (3,) float32 on cpu "
      "are on different devices");
  EXPECT_ERROR(DeviceError,
               nn::sparse_categorical_crossentropy(zeros({2}, DType::Int64), claims_cuda({2, 5})),
               "[sparse_categorical_crossentropy] labels");
}

TEST(Errors, UnnamedLayersReportUnderTheirType) {
  nn::Dense dense(2);
  dense(ones({1, 3}));
  EXPECT_ERROR(ShapeError, dense(ones({1, 4})), "[dense] input (1, 4) has 4 features");
  nn::LSTM lstm(2);
  lstm(ones({1, 2, 3}));
  EXPECT_ERROR(ShapeError, lstm(ones({1, 2, 4})), "[lstm] input (1, 2, 4)");
  // Inside a model the name says which one.
  nn::Sequential model;
  model.add<nn::Dense>(2);
  model.add<nn::Dense>(2);
  model(ones({1, 3}));
  auto second = std::static_pointer_cast<nn::Dense>(model.layers()[1].second);
  EXPECT_ERROR(ShapeError, (*second)(ones({1, 3})), "[dense_1] input (1, 3)");
}

TEST(Errors, DevicesWithoutAGpu) {
  if (cuda_available()) GTEST_SKIP() << "a GPU is present";
  EXPECT_THROW(zeros({2}, DType::Float32, Device::cuda()), DeviceError);
  EXPECT_THROW(ones({2}).to(Device::cuda()), DeviceError);
  test::expect_values(ones({1}), {1});
  // A generator that could not be made leaves nothing behind for manual_seed to trip over.
  EXPECT_THROW(normal({2}, 0, 1, DType::Float32, Device::cuda()), DeviceError);
  EXPECT_THROW(Generator::default_for(Device::cuda()), DeviceError);
  manual_seed(5);
  EXPECT_EQ(Generator::default_for(Device::cpu()).seed(), 5u);
}

}  // namespace
}  // namespace encore
