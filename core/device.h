// Where a tensor lives: the CPU, or one CUDA device.
#pragma once

#include "core/cxx20.h"

#include <cstdint>
#include <string>

namespace encore {

enum class DeviceType : uint8_t { CPU = 0, CUDA = 1 };
constexpr int kNumDeviceTypes = 2;

struct Device {
  DeviceType type = DeviceType::CPU;
  int8_t index = 0;

  static constexpr Device cpu() { return {DeviceType::CPU, 0}; }
  static constexpr Device cuda(int i = 0) { return {DeviceType::CUDA, static_cast<int8_t>(i)}; }
  constexpr bool is_cpu() const { return type == DeviceType::CPU; }
  constexpr bool is_cuda() const { return type == DeviceType::CUDA; }
  friend constexpr bool operator==(Device a, Device b) {
    return a.type == b.type && a.index == b.index;
  }
  std::string str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }
};

/// Parses "cpu", "cuda", "cuda:1".
Device parse_device(const std::string& s);

/// CUDA devices present at run time (0 without a GPU or without the CUDA backend).
int cuda_device_count();
inline bool cuda_available() { return cuda_device_count() > 0; }
/// True when the CUDA backend is present: this encore was built with it and its plugin loaded
/// (the CUDA libraries were found), whether or not a GPU is present. Defined in core/backend.cpp.
bool cuda_built();
/// Waits until all queued work on `device` has finished (no-op on the CPU).
void synchronize(Device device);

namespace cuda {
/// True when CUDA work can run here: the CUDA backend loaded and a device is present.
inline bool is_available() { return cuda_available(); }
/// Why is_available() is false, one line: no CUDA backend in this build, no plugin, the
/// plugin failed to load (with the loader's error, e.g. a missing libcudart), no driver, no
/// device. Empty when it is true.
std::string unavailable_reason();
}  // namespace cuda

}  // namespace encore
