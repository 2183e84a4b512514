#include "core/storage.h"

#include "core/allocator.h"
#include "core/backend.h"
#include "core/cpu_allocator.h"
#include "core/ledger.h"

namespace encore {

uint64_t Storage::serial() const {
  static std::atomic<uint64_t> last{0};
  uint64_t s = serial_.load(std::memory_order_acquire);
  if (s) return s;
  const uint64_t mine = last.fetch_add(1, std::memory_order_relaxed) + 1;
  // Two threads asking at once: the first to store wins, and both return its number.
  return serial_.compare_exchange_strong(s, mine, std::memory_order_acq_rel) ? mine : s;
}

Allocator& allocator_for(Device device) {
  if (device.is_cpu()) return cpu_allocator();
  return require_backend(device, "alloc").allocator(device.index);
}

std::shared_ptr<Storage> Storage::allocate(size_t nbytes, Device device) {
  auto s = std::make_shared<Storage>(Token());
  s->data_ = allocator_for(device).allocate(nbytes, device);
  s->nbytes_ = nbytes;
  s->device_ = device;
  s->owned_ = true;
  Ledger::global().on_allocate(nbytes);
  return s;
}

std::shared_ptr<Storage> Storage::wrap(void* data, size_t nbytes, Device device,
                                       std::shared_ptr<void> owner) {
  auto s = std::make_shared<Storage>(Token());
  s->data_ = data;
  s->nbytes_ = nbytes;
  s->device_ = device;
  s->owner_ = std::move(owner);
  return s;
}

std::shared_ptr<Storage> Storage::symbolic(size_t nbytes, Device device, uint64_t trace_id,
                                           uint32_t buffer) {
  auto s = std::make_shared<Storage>(Token());
  s->nbytes_ = nbytes;
  s->device_ = device;
  s->trace_id_ = trace_id;
  s->buffer_ = buffer;
  return s;
}

Storage::~Storage() {
  if (!owned_ || !data_) return;
  allocator_for(device_).deallocate(data_, nbytes_, device_);
  Ledger::global().on_free(nbytes_);
}

}  // namespace encore
