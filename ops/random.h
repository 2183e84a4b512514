// Random number generators. A Generator's state — seed and offset — lives in a tiny int64
// tensor on its device, and random ops read and advance it as an ordinary (mutated) input.
// A traced step therefore records the state update in its graph: each replay draws fresh
// values, and an eager run and a traced run from the same seed draw the same ones.
#pragma once

#include <cstdint>

#include "ops/tensor.h"

namespace encore {

class Generator {
 public:
  explicit Generator(uint64_t seed = 0, Device device = Device::cpu());

  void manual_seed(uint64_t seed);
  uint64_t seed() const;
  /// Blocks of the Philox stream consumed so far (reads device memory).
  uint64_t offset() const;
  Device device() const { return state_.device(); }
  /// (seed, offset) as an int64 tensor of shape (2,).
  const Tensor& state() const { return state_; }

  /// The default generator of a device (created on first use, seed 0).
  static Generator& default_for(Device device);

 private:
  Tensor state_;
};

/// Seeds the default generator of every device.
void manual_seed(uint64_t seed);

/// `gen`, or the default generator of `device`; a DeviceError naming `op` if `gen` is on another
/// device.
Generator& generator_for(Generator* gen, Device device, const char* op);

}  // namespace encore
