// Keras' default initializers. Parameters are drawn on the CPU from a generator (default:
// the CPU default generator, so `manual_seed` makes model construction reproducible).
#pragma once

#include "ops/random.h"
#include "ops/tensor.h"

namespace encore::nn::init {

/// U(-limit, limit) with limit = sqrt(6 / (fan_in + fan_out)).
Tensor glorot_uniform(const Shape& shape, int64_t fan_in, int64_t fan_out,
                      Generator* gen = nullptr);
/// A (rows, cols) matrix with orthonormal rows or columns (QR of a Gaussian matrix, signs
/// fixed by R's diagonal, as in Keras).
Tensor orthogonal(int64_t rows, int64_t cols, Generator* gen = nullptr);

}  // namespace encore::nn::init
