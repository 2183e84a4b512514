// What the CPU can do, read from cpuid and /proc/cpuinfo: the vector ISA the libraries' kernels
// should use, and the theoretical float32 FMA peak that benchmarks compare against (a number no
// library of encore's produced).
#pragma once

#include <string>

namespace encore {

/// x86 vector ISA levels, oldest first (each includes the ones before).
enum class CpuIsa { Sse3, Avx, Avx2, Avx512, Avx512Bf16 };

/// "SSE3", "AVX", "AVX2", "AVX-512", "AVX-512 BF16".
const char* name(CpuIsa isa);

struct CpuInfo {
  std::string model;       // /proc/cpuinfo's "model name"
  std::string vendor;      // "GenuineIntel", "AuthenticAMD", ...
  CpuIsa isa = CpuIsa::Sse3;  // the newest level the CPU and the OS both support
  double ghz = 0;          // the clock /proc/cpuinfo reports (a VM's nominal clock; turbo may exceed it)
  /// float32 multiply-adds' flops per cycle and core: 2 FMA pipes x vector lanes x 2, with AMD's
  /// Zen 4 counted at its 256-bit datapath (it splits AVX-512 instructions in two).
  int flops_per_cycle = 0;
  std::string peak_basis;  // how flops_per_cycle was derived, in words
  /// The theoretical float32 FMA peak of `threads` cores, GFLOP/s (0 when the clock is unknown).
  double peak_gflops(int threads) const { return ghz * flops_per_cycle * threads; }
};

/// This machine's CPU (read once).
const CpuInfo& cpu_info();

}  // namespace encore
