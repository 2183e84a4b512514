// Reductions over a set of axes: their attributes, shared by the CPU and CUDA kernels.
#pragma once

#include <string>

#include "core/error.h"

namespace encore {

struct ReduceAttrs {
  uint32_t axes;  // bit i set: reduce axis i
  bool keepdim;
  std::string str() const {
    std::string s = "axes=[";
    bool first = true;
    for (int i = 0; i < 32; ++i)
      if (axes >> i & 1u) {
        if (!first) s += ',';
        s += std::to_string(i);
        first = false;
      }
    return s + "]" + (keepdim ? ", keepdim" : "");
  }
  bool operator==(const ReduceAttrs&) const = default;
};

}  // namespace encore
