// The CUDA runtime layer: devices, the one compute stream per device, the stream-ordered
// pool allocator, and kernel timing with events. Only compiled with the CUDA backend.
#pragma once

#include <cuda_runtime_api.h>

#include "core/allocator.h"
#include "ops/registry.h"

namespace encore::cuda {

/// Devices present (0 when there is no driver or no GPU; never throws).
int device_count();
/// Throws DeviceError naming the device when it is not present.
void require_device(int device);
/// The allocator for `device`: cudaMallocAsync on the compute stream from a memory pool
/// whose release threshold keeps freed memory cached.
Allocator& allocator(int device);
/// The compute stream of `device`: every kernel, copy and capture of encore runs on it.
cudaStream_t stream(int device);
void synchronize(int device);
/// Runs `kernel` between two events on the compute stream, waits, and adds the elapsed time
/// to the ledger's kernel time (and a Chrome-trace event). Used while profiling is on.
void time_kernel(KernelFn kernel, const KernelCtx& ctx, const char* name, int device);

}  // namespace encore::cuda
