// A Storage is one allocation that tensors view. A symbolic Storage belongs to a trace: it
// has a size and a buffer number in that trace's graph but no memory until replay.
#pragma once

#include "core/cxx20.h"

#include <atomic>
#include <cstdint>
#include <memory>

#include "core/device.h"

namespace encore {

class Storage {
 public:
  /// Allocates `nbytes` on `device` (uninitialized).
  static std::shared_ptr<Storage> allocate(size_t nbytes, Device device);
  /// Views memory owned by someone else (a NumPy array, a DLPack producer, a Plan's arena);
  /// `owner` is kept alive as long as this storage is.
  static std::shared_ptr<Storage> wrap(void* data, size_t nbytes, Device device,
                                       std::shared_ptr<void> owner);
  /// A buffer of the trace `trace_id` with no memory behind it.
  static std::shared_ptr<Storage> symbolic(size_t nbytes, Device device, uint64_t trace_id,
                                           uint32_t buffer);

  // Public for make_shared (one allocation for the storage and its count), but only this class
  // can make a Token.
  class Token {
    friend class Storage;
    Token() = default;
  };
  explicit Storage(Token) {}
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage();

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  bool is_symbolic() const { return trace_id_ != 0; }
  uint64_t trace_id() const { return trace_id_; }
  uint32_t buffer() const { return buffer_; }

  /// Bumped by every in-place write; autograd uses it to reject stale saved tensors.
  uint32_t version() const { return version_; }
  void bump_version() { ++version_; }
  /// A number no other storage of this process has had or will have: an identity that holds
  /// where an address does not (the allocator hands a freed block to the next storage). Given
  /// on the first call, so that making a storage costs nothing for it.
  uint64_t serial() const;

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  bool owned_ = false;
  uint32_t version_ = 0;
  uint32_t buffer_ = 0;
  uint64_t trace_id_ = 0;
  mutable std::atomic<uint64_t> serial_{0};  // 0: not given yet
  std::shared_ptr<void> owner_;
};

}  // namespace encore
