#include "core/cuda/check.h"

#include <cstring>

#include "core/error.h"

namespace encore::cuda {

std::string status_string(cudaError_t s) {
  return std::string(cudaGetErrorName(s)) + " (" + cudaGetErrorString(s) + ")";
}

std::string status_string(cublasStatus_t s) { return cublasGetStatusString(s); }

std::string status_string(cudnnStatus_t s) { return cudnnGetErrorString(s); }

std::string status_string(curandStatus_t s) {
  switch (s) {
    case CURAND_STATUS_SUCCESS:
      return "CURAND_STATUS_SUCCESS";
    case CURAND_STATUS_VERSION_MISMATCH:
      return "CURAND_STATUS_VERSION_MISMATCH";
    case CURAND_STATUS_NOT_INITIALIZED:
      return "CURAND_STATUS_NOT_INITIALIZED";
    case CURAND_STATUS_ALLOCATION_FAILED:
      return "CURAND_STATUS_ALLOCATION_FAILED";
    case CURAND_STATUS_TYPE_ERROR:
      return "CURAND_STATUS_TYPE_ERROR";
    case CURAND_STATUS_OUT_OF_RANGE:
      return "CURAND_STATUS_OUT_OF_RANGE";
    case CURAND_STATUS_LENGTH_NOT_MULTIPLE:
      return "CURAND_STATUS_LENGTH_NOT_MULTIPLE";
    case CURAND_STATUS_DOUBLE_PRECISION_REQUIRED:
      return "CURAND_STATUS_DOUBLE_PRECISION_REQUIRED";
    case CURAND_STATUS_LAUNCH_FAILURE:
      return "CURAND_STATUS_LAUNCH_FAILURE";
    case CURAND_STATUS_PREEXISTING_FAILURE:
      return "CURAND_STATUS_PREEXISTING_FAILURE";
    case CURAND_STATUS_INITIALIZATION_FAILED:
      return "CURAND_STATUS_INITIALIZATION_FAILED";
    case CURAND_STATUS_ARCH_MISMATCH:
      return "CURAND_STATUS_ARCH_MISMATCH";
    case CURAND_STATUS_INTERNAL_ERROR:
      return "CURAND_STATUS_INTERNAL_ERROR";
  }
  return "curandStatus " + std::to_string(static_cast<int>(s));
}

std::string describe_capture(cudaStreamCaptureStatus status, cudaError_t last_error) {
  const char* state = status == cudaStreamCaptureStatusNone          ? "none (not capturing)"
                      : status == cudaStreamCaptureStatusActive      ? "active"
                      : status == cudaStreamCaptureStatusInvalidated ? "invalidated"
                                                                     : "unknown";
  return detail::cat("capture status ", state, ", last CUDA error ",
                     last_error == cudaSuccess ? std::string("none") : status_string(last_error));
}

void throw_status(const char* op, const char* call, const std::string& status, bool oom,
                  const char* file, int line) {
  // Quote the call up to its argument list: the arguments are long and say little.
  std::string what(call);
  if (const size_t paren = what.find('('); paren != std::string::npos && paren + 1 < what.size())
    what = what.substr(0, paren) + "(...)";
  const char* base = std::strstr(file, "/core/")  ? std::strstr(file, "/core/") + 1
                     : std::strstr(file, "/ops/") ? std::strstr(file, "/ops/") + 1
                                                  : file;
  const std::string msg =
      detail::cat("[", op, "] ", what, " failed: ", status, " (", base, ":", line, ")");
  if (oom) throw OutOfMemoryError(msg);
  throw BackendError(msg);
}

}  // namespace encore::cuda
