#include "ops/random.h"

#include <map>
#include <memory>
#include <mutex>

#include "core/modes.h"
#include "ops/ops.h"

namespace encore {

namespace {
std::mutex g_mutex;
std::map<std::pair<int, int>, std::unique_ptr<Generator>>& defaults() {
  static std::map<std::pair<int, int>, std::unique_ptr<Generator>> m;
  return m;
}
}  // namespace

Generator::Generator(uint64_t seed, Device device) {
  state_ = from_vector<int64_t>({static_cast<int64_t>(seed), 0}, {2}, device);
  state_.set_name("generator");
}

void Generator::manual_seed(uint64_t seed) {
  ENCORE_CHECK(!tracing(), ValueError,
               "[manual_seed] cannot reseed inside a traced function; seed before tracing");
  state_.copy_(from_vector<int64_t>({static_cast<int64_t>(seed), 0}, {2}));
}

uint64_t Generator::seed() const { return static_cast<uint64_t>(state_.to_vector<int64_t>()[0]); }
uint64_t Generator::offset() const { return static_cast<uint64_t>(state_.to_vector<int64_t>()[1]); }

Generator& Generator::default_for(Device device) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const std::pair<int, int> key{static_cast<int>(device.type), device.index};
  auto it = defaults().find(key);
  // Constructed before it is inserted: a device that cannot be used (no GPU) throws here and
  // leaves no entry behind for manual_seed to trip over.
  if (it == defaults().end())
    it = defaults().emplace(key, std::make_unique<Generator>(0, device)).first;
  return *it->second;
}

Generator& generator_for(Generator* gen, Device device, const char* op) {
  Generator& g = gen ? *gen : Generator::default_for(device);
  ENCORE_CHECK(g.device() == device, DeviceError, "[", op, "] generator is on ", g.device().str(),
               " but the tensor is requested on ", device.str());
  return g;
}

void manual_seed(uint64_t seed) {
  Generator::default_for(Device::cpu());
  std::lock_guard<std::mutex> lock(g_mutex);
  for (auto& [key, g] : defaults()) g->manual_seed(seed);
}

}  // namespace encore
