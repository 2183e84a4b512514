// One exception hierarchy for every user-facing failure. Messages start with the op in
// brackets and name the shapes: "[conv1d] input (32, 140, 30) has 30 channels but ...".
#pragma once

#include "core/cxx20.h"

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace encore {

/// The base of every encore error (Python: encore.Error; each kind below is also the Python
/// builtin named).
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
/// Incompatible or invalid shapes (Python: ValueError).
class ShapeError : public Error {
  using Error::Error;
};
/// Wrong element type (Python: TypeError).
class DTypeError : public Error {
  using Error::Error;
};
/// Tensors on the wrong or mixed devices, or a device that is not present (Python: RuntimeError).
class DeviceError : public Error {
  using Error::Error;
};
/// Bad argument values, or reading a value that does not exist yet (Python:
/// encore.InvalidValueError, a ValueError).
class ValueError : public Error {
  using Error::Error;
};
/// A feature this build or this configuration does not support (Python: RuntimeError).
class UnsupportedError : public Error {
  using Error::Error;
};
/// Allocation failure; the runtime stays usable afterwards (Python: MemoryError).
class OutOfMemoryError : public Error {
  using Error::Error;
};
/// A failure inside a backend library call (Python: RuntimeError).
class BackendError : public Error {
  using Error::Error;
};
/// A file that could not be written or read (Python: encore.FileError, an OSError; with an
/// errno, the subclass it selects: FileNotFoundError, PermissionError, IsADirectoryError...).
/// What a file holds is a value: a corrupt or truncated file is a ValueError.
class FileError : public Error {
 public:
  FileError(const std::string& message, std::string path, int code)
      : Error(message), path_(std::move(path)), code_(code) {}
  const std::string& path() const { return path_; }
  /// errno of the call that failed; 0 when the path names something that is not a regular
  /// file (a device, a FIFO, a socket).
  int code() const { return code_; }

 private:
  std::string path_;
  int code_;
};
/// A collective that failed or did not finish in time, or ranks that disagree on what they run
/// (Python: encore.DistributedError, a RuntimeError).
class DistributedError : public Error {
  using Error::Error;
};

namespace detail {
template <class... Args> std::string cat(const Args&... args) {
  std::ostringstream s;
  (s << ... << args);
  return s.str();
}
}  // namespace detail

}  // namespace encore

/// Throws `Kind` with the streamed message when `cond` is false: user input is never asserted.
#define ENCORE_CHECK(cond, Kind, ...)                            \
  do {                                                           \
    if (!(cond)) throw Kind(::encore::detail::cat(__VA_ARGS__)); \
  } while (0)

namespace encore {

/// Throws ValueError "[fn] path contains a NUL byte ...": the system reads a path only up to
/// it, so the call would write or read another file.
inline void check_path(const std::string& path, const char* fn) {
  const size_t nul = path.find('\0');
  ENCORE_CHECK(nul == std::string::npos, ValueError, "[", fn, "] path contains a NUL byte (after '",
               path.substr(0, nul), "')");
}

}  // namespace encore
