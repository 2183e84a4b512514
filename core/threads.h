// The CPU backend's one thread pool. oneDNN and OpenBLAS (its OpenMP build) both run on the
// OpenMP runtime, so they share one pool of workers; its size is encore's setting.
#pragma once

namespace encore {

/// Threads CPU kernels use (oneDNN and BLAS alike). Initially ENCORE_NUM_THREADS when set,
/// else OpenMP's default (OMP_NUM_THREADS, or one per core).
int num_threads();
/// Sets the pool size for every thread that runs encore kernels (a ValueError for n < 1).
void set_num_threads(int n);
/// Applies num_threads() to the calling thread (OpenMP keeps the count per thread); called
/// before CPU kernels run, eagerly and in a replay. One thread-local compare when unchanged.
void sync_threads();

}  // namespace encore
