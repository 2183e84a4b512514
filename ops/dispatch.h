// The one dispatcher. Every op call goes through `dispatch`: shape inference, then either
// run the backend kernel now (eager) or append a node to the active trace (no kernel runs),
// then record the autograd tape. Both backends and both modes share this path.
#pragma once

#include <initializer_list>

#include "ops/registry.h"

namespace encore {

/// The outputs of one op call (at most kMaxOutputs).
struct OutList {
  std::array<Tensor, kMaxOutputs> t;
  int n = 0;
  Tensor& operator[](int i) { return t[i]; }
  const Tensor& operator[](int i) const { return t[i]; }
};

OutList dispatch(OpId op, std::span<const Tensor> in, const Attrs& attrs = NoAttrs{});

/// First output of an op call, for the common single-output case.
inline Tensor call(OpId op, std::initializer_list<Tensor> in, const Attrs& attrs = NoAttrs{}) {
  return dispatch(op, {in.begin(), in.size()}, attrs)[0];
}

/// The kernel view of a tensor with data.
TensorRef ref(const Tensor& t);

}  // namespace encore
