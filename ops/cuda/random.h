// Generator state on the GPU: random ops read (seed, offset) from the state tensor in device
// memory and advance the offset with a one-thread kernel queued after them, never a host read,
// so a captured graph draws fresh values on every replay.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace encore::cuda {

/// state[1] += blocks, ordered after the kernels already queued on `stream` that read it.
void advance_generator(int64_t* state, uint64_t blocks, cudaStream_t stream, const char* op);

}  // namespace encore::cuda
