#include "nn/recurrent.h"

#include "nn/gru.h"
#include "ops/ops.h"

namespace encore::nn {

std::span<const char* const> option_names(RecurrentImplementation) {
  static constexpr const char* kNames[] = {"auto", "composed", "cudnn"};
  return kNames;
}

Bidirectional::Bidirectional(std::shared_ptr<Recurrent> layer, BidirectionalOptions options)
    : forward_(std::move(layer)), merge_mode_(std::move(options.merge_mode)) {
  ENCORE_CHECK(forward_, ValueError, "[bidirectional] needs a layer");
  ENCORE_CHECK(merge_mode_ == "concat" || merge_mode_ == "sum" || merge_mode_ == "mul" ||
                   merge_mode_ == "ave",
               ValueError, "[bidirectional] unknown merge_mode '", merge_mode_,
               "' (expected concat, sum, mul or ave)");
  backward_ = forward_->reversed();
  add_child("forward_" + forward_->type_name(), forward_);
  add_child("backward_" + backward_->type_name(), backward_);
}

Shape Bidirectional::build_impl(const Shape& s) {
  Shape out = forward_->build(s);
  backward_->build(s);
  if (merge_mode_ == "concat") out[out.size() - 1] *= 2;
  return out;
}

Tensor Bidirectional::forward_impl(const Tensor& x) {
  const Tensor f = forward_->forward(x);
  Tensor b = backward_->forward(x);
  if (backward_->reverses_sequence_output()) {
    // A bucketed call: the valid steps alone are in reversed order.
    const auto l = graph::lengths_of(x);
    b = l && l->axis == 1 ? reverse_sequence(b, l->length) : flip(b, 1);
  }
  if (merge_mode_ == "concat") return concat({f, b}, -1);
  if (merge_mode_ == "sum") return f + b;
  if (merge_mode_ == "mul") return f * b;
  return (f + b) * 0.5;
}

namespace {

const LayerDef& bidirectional_layer = define_layer({
    .name = "Bidirectional",
    .signature = "Bidirectional(layer: Recurrent)",
    .options = &BidirectionalOptions::fields,
    .make = [](const CallArgs& a) -> LayerPtr {
      return std::make_shared<Bidirectional>(layer_arg<Recurrent>(a, 0),
                                             options_of<BidirectionalOptions>(a));
    },
    .doc = "A recurrent layer (LSTM, GRU) and a reversed copy of it, run over the same input, "
           "their outputs merged.",
    .example = {.make =
                    [] {
                      return LayerPtr(std::make_shared<Bidirectional>(
                          std::make_shared<GRU>(3, GRUOptions{.return_sequences = true})));
                    },
                .input = {{2, 5, 4}}},
});

}  // namespace

}  // namespace encore::nn
