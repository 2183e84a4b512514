// Plain-loop conv1d references (float64 kernels, and the yardstick for oneDNN / cuDNN tests).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace encore::cpu {

struct ConvGeometry {
  int64_t n, length, channels, filters, kernel, out_length, stride, dilation, pad_l;
};

template <class T> void conv1d_reference(const ConvGeometry& g, const T* x, const T* w, T* y);
template <class T>
void conv1d_backward_data_reference(const ConvGeometry& g, const T* gy, const T* w, T* gx);
template <class T>
void conv1d_backward_filter_reference(const ConvGeometry& g, const T* x, const T* gy, T* gw);

struct ConvPrimitiveInfo {
  std::string key;   // "forward N=32 L=140 C=30 F=128 K=40 stride=4 dilation=1 pad=(18, 18)"
  std::string impl;  // the implementation oneDNN chose, e.g. "x64:gemm:jit"
};
/// The cached oneDNN primitives: which shapes paid the setup cost, and what was chosen.
std::vector<ConvPrimitiveInfo> conv1d_primitives();
/// Forgets them (Plans keep the ones they hold): the next use of each shape pays again.
void clear_conv1d_primitives();

}  // namespace encore::cpu
