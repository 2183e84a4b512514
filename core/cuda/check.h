// Status checks for CUDA runtime, cuBLAS, cuDNN and cuRAND calls. A failed call throws, never
// aborts: OutOfMemoryError when the library ran out of memory, BackendError otherwise. The
// message names the op, quotes the failing call and gives the library's status string:
//   "[conv1d] cudnnConvolutionForward(...) failed: CUDNN_STATUS_BAD_PARAM (conv1d.cpp:212)"
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <curand.h>

#include <string>
#include <type_traits>

namespace encore::cuda {

std::string status_string(cudaError_t s);
std::string status_string(cublasStatus_t s);
std::string status_string(cudnnStatus_t s);
std::string status_string(curandStatus_t s);

/// What a failed CUDA Graph capture leaves to go on, for its error message: "capture status
/// invalidated, last CUDA error cudaErrorStreamCaptureUnsupported (operation not permitted when
/// stream is capturing)" ("none" when no error is pending).
std::string describe_capture(cudaStreamCaptureStatus status, cudaError_t last_error);

inline bool failed(cudaError_t s) { return s != cudaSuccess; }
inline bool failed(cublasStatus_t s) { return s != CUBLAS_STATUS_SUCCESS; }
inline bool failed(cudnnStatus_t s) { return s != CUDNN_STATUS_SUCCESS; }
inline bool failed(curandStatus_t s) { return s != CURAND_STATUS_SUCCESS; }

inline bool out_of_memory(cudaError_t s) { return s == cudaErrorMemoryAllocation; }
inline bool out_of_memory(cublasStatus_t s) { return s == CUBLAS_STATUS_ALLOC_FAILED; }
inline bool out_of_memory(cudnnStatus_t s) { return s == CUDNN_STATUS_ALLOC_FAILED; }
inline bool out_of_memory(curandStatus_t s) { return s == CURAND_STATUS_ALLOCATION_FAILED; }

[[noreturn]] void throw_status(const char* op, const char* call, const std::string& status,
                               bool oom, const char* file, int line);

template <class Status>
void check_status(Status s, const char* op, const char* call, const char* file, int line) {
  if (!failed(s)) [[likely]]
    return;
  // A failed runtime call also sets the thread's "last error"; clear it (when it is not a
  // sticky error) so that the next launch check does not report it a second time.
  if constexpr (std::is_same_v<Status, cudaError_t>) (void)cudaGetLastError();
  throw_status(op, call, status_string(s), out_of_memory(s), file, line);
}

}  // namespace encore::cuda

/// Checks the status returned by a CUDA / cuBLAS / cuDNN / cuRAND call; `op` names the op
/// (or runtime component) in the error message.
#define ENCORE_CUDA_CHECK(op, call) \
  ::encore::cuda::check_status((call), (op), #call, __FILE__, __LINE__)

/// After every kernel launch: reports a bad launch configuration or a missing kernel image.
#define ENCORE_CUDA_LAUNCH_CHECK(op) \
  ::encore::cuda::check_status(cudaGetLastError(), (op), "kernel launch", __FILE__, __LINE__)
