// How encore writes and reads whole files (checkpoints, autotune choices, Chrome traces).
//
// Writes are atomic: the bytes go to `<path>.<pid>-<n>.tmp` in the same folder (created with
// O_EXCL and held under an exclusive flock while written), which is synced and renamed over
// the path, and the folder is synced. A process killed mid-write leaves the previous file and
// such a temporary; the next write to the same path removes every temporary of that path that
// no process holds any more and whose writer is gone (its pid is not a live process here, or
// it was last modified more than an hour ago: a reused pid). A path that names something other
// than a regular file (a directory, a device such as /dev/null, a FIFO, a socket) is refused:
// renaming over it would replace it. A symbolic link is followed: its target is replaced and
// the link stays.
//
// Every failure of the system is a FileError naming the path and carrying errno (Python: the
// OSError subclass errno selects, e.g. FileNotFoundError, PermissionError).
#pragma once

#include "core/cxx20.h"

#include <cstddef>
#include <string>
#include <string_view>

namespace encore {

/// Writes one file atomically (see above). `fn` names the caller in messages ("save").
class AtomicFile {
 public:
  /// Refuses a target that is not a regular file, removes stale temporaries of `path` and
  /// creates the temporary file. Throws FileError.
  AtomicFile(const std::string& path, const char* fn);
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  /// Removes the temporary file unless commit() renamed it.
  ~AtomicFile();

  void write(const void* data, size_t n);
  void write(std::string_view s) { write(s.data(), s.size()); }
  /// Syncs the temporary file, renames it over the path and syncs the folder.
  void commit();

  /// The temporary file's path (tests).
  const std::string& temporary() const { return temp_; }

 private:
  [[noreturn]] void fail(const std::string& what, int err) const;

  std::string fn_, path_, target_, temp_;  // target_: path_ with a symbolic link followed
  int fd_ = -1;
  bool renamed_ = false;
};

/// Writes `contents` to `path` with an AtomicFile.
void write_file(const std::string& path, std::string_view contents, const char* fn);
/// The whole contents of the regular file `path`. Throws FileError.
std::string read_file(const std::string& path, const char* fn);

/// Throws FileError "[fn] cannot <verb> <path>: <what>: <strerror(err)>".
[[noreturn]] void throw_file_error(const char* fn, const char* verb, const std::string& path,
                                   const std::string& what, int err);
/// Throws FileError (errno EISDIR for a directory, 0 otherwise) when `mode` (st_mode) is not a
/// regular file's.
void check_regular_file(unsigned mode, const char* fn, const char* verb, const std::string& path);

}  // namespace encore
