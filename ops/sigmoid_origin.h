// Where a tensor of probabilities came from: sigmoid() records its logits on its result, in a
// slot of TensorImpl::extensions this layer owns, so that binary_crossentropy (nn/losses.cpp)
// can compute from the logits (numerically stable, and a saturated output keeps its gradient),
// as Keras does.
#pragma once

#include "ops/tensor.h"

namespace encore {

/// Valid while neither storage changed since: the storages and their versions are recorded.
struct SigmoidOrigin {
  std::shared_ptr<TensorImpl> logits;
  std::weak_ptr<const Storage> logits_storage;  // set_data may give the logits another one
  uint32_t logits_version = 0;
  std::weak_ptr<const Storage> storage;  // of the probabilities, which set_data may replace too
  uint32_t version = 0;                  // of the probabilities' storage
};

/// What sigmoid() recorded on `p`, or null.
const SigmoidOrigin* sigmoid_origin(const TensorImpl& p);
/// The logits `p` is the sigmoid of while neither tensor was written in place nor given new
/// storage since; undefined otherwise.
Tensor unchanged_sigmoid_logits(const Tensor& p);

}  // namespace encore
