// Checkpoint files in the safetensors format (https://github.com/huggingface/safetensors): an
// 8-byte little-endian header size, a JSON header giving each tensor's dtype, shape and byte
// range, then the raw little-endian data. Other tools read encore's files and encore reads
// theirs (F32, F64, I32 and I64 tensors).
//
// Writes are atomic (core/file.h): the file is written to `<path>.<pid>-<n>.tmp` in the same
// folder, synced, and renamed over `path`, so a process killed during a save leaves the
// previous file (and its temporary file, which the next save to `path` removes) rather than a
// torn one. Loads read and
// validate the whole file before returning anything. Files encore writes carry, in their
// metadata, the format version, the encore version and CRC-32 checksums of the header and the
// data, and are verified on load; files without them load unverified.
#pragma once

#include <map>
#include <string>

#include "nn/module.h"

namespace encore::nn {

/// The string map stored as "__metadata__". Keys starting with "encore." are written by encore.
using Metadata = std::map<std::string, std::string>;

/// A file's tensors (on the host, in file order) and its metadata.
struct TensorFile {
  NamedTensors tensors;
  Metadata metadata;
};

/// Writes `tensors` (any device; names unique and non-empty) and `metadata` (keys starting with
/// "encore." are reserved) to `path`, atomically. Throws FileError, leaving the previous file
/// intact, when the file cannot be written (missing folder, no permission, disk full) or `path`
/// is not a regular file (a device, a FIFO, a directory); ValueError for bad names or metadata.
void save_tensors(const std::string& path, const NamedTensors& tensors,
                  const Metadata& metadata = {});
/// Reads and validates the whole safetensors file at `path` (structure, offsets, dtypes, and
/// the checksums of a file encore wrote). Throws FileError for a file that cannot be read
/// (missing, no permission, not a regular file), ValueError naming the file, and the tensor
/// where there is one, for a truncated, corrupt or unsupported one.
TensorFile load_tensors(const std::string& path);

/// Writes every parameter and buffer (Module::named_weights) of `module` to `path` with
/// save_tensors.
void save(const Module& module, const std::string& path);
/// Loads `path` into `module`'s parameters and buffers, all or nothing: the file must hold
/// every one exactly once with its shape (else ShapeError) and dtype, and nothing else; on any
/// error the module is left untouched. Of a training checkpoint (nn/resume.h) it reads the model
/// part.
void load(Module& module, const std::string& path);

}  // namespace encore::nn
