// The CPU backend's one thread pool. oneDNN and OpenBLAS (its OpenMP build) both run on the
// OpenMP runtime, so they share one pool of workers; its size is encore's setting.
#pragma once

#include "core/cxx20.h"

namespace encore {

/// Threads CPU kernels use (oneDNN and BLAS alike). Initially ENCORE_NUM_THREADS when set,
/// else OpenMP's default (OMP_NUM_THREADS, or one per core).
int num_threads();
/// Sets the pool size for every thread that runs encore kernels (a ValueError for n < 1).
/// UnsupportedError for n > 1 in a process pinned to one thread by fork (below).
void set_num_threads(int n);
/// Whether this process was forked by a thread whose OpenMP workers had started: GNU OpenMP
/// cannot start them again in the child, so it runs its kernels on one thread.
bool threads_pinned_by_fork();
/// Applies num_threads() to the calling thread (OpenMP keeps the count per thread); called
/// before CPU kernels run, eagerly and in a replay. One thread-local compare when unchanged.
void sync_threads();

}  // namespace encore
