// What the CPU can do, read from cpuid and /proc/cpuinfo: the vector ISA the libraries' kernels
// should use, and the theoretical float32 FMA peak that benchmarks compare against (a number no
// library of encore's produced); which kernels OpenBLAS and oneDNN run.
//
// OpenBLAS picks its kernels per CPU when it loads (a DYNAMIC_ARCH build, as Debian's and the
// wheel's), by CPU model: a model newer than the library (0.3.21 and a newer Xeon) fell back to
// its SSE3 "Prescott" kernels, 4-5x slower than its AVX-512 ones. libencore re-selects the core
// while it loads (cpu_info.cpp) from what cpuid says the CPU supports, so C++ programs and the
// Python package get the same kernels.
#pragma once

#include "core/cxx20.h"

#include <string>

namespace encore {

/// x86 vector ISA levels, oldest first (each includes the ones before).
enum class CpuIsa { Sse3, Avx, Avx2, Avx512, Avx512Bf16 };

/// "SSE3", "AVX", "AVX2", "AVX-512", "AVX-512 BF16".
const char* name(CpuIsa isa);

struct CpuInfo {
  std::string model;          // /proc/cpuinfo's "model name"
  std::string vendor;         // "GenuineIntel", "AuthenticAMD", ...
  CpuIsa isa = CpuIsa::Sse3;  // the newest level the CPU and the OS both support
  double nominal_ghz = 0;     // /proc/cpuinfo's clock (in a VM the nominal one; turbo exceeds it)
  /// float32 multiply-adds' flops per cycle and core: 2 FMA pipes x vector lanes x 2, with AMD's
  /// Zen 4 counted at its 256-bit datapath (it splits AVX-512 instructions in two).
  int flops_per_cycle = 0;
  std::string peak_basis;  // how flops_per_cycle was derived, in words
  /// The theoretical float32 FMA peak of `threads` cores, GFLOP/s, at cpu_clock_ghz() (0 when
  /// no clock is known).
  double peak_gflops(int threads) const;
};

/// This machine's CPU (read once, when libencore loads).
const CpuInfo& cpu_info();
/// The clock a core runs at under load, turbo included: a chain of dependent integer adds (one
/// per cycle on every x86 core since the P6) timed, the fastest of a few ~1 ms runs, measured on
/// the first call (0 off x86).
double measured_cpu_clock_ghz();
/// The clock the theoretical peak takes: the faster of /proc/cpuinfo's and the measured one.
double cpu_clock_ghz();

namespace cpu {

/// The ISA level an OpenBLAS core name's kernels use ("Prescott" -> SSE3, "SkylakeX" -> AVX-512).
CpuIsa blas_core_isa(const std::string& core);
/// The ISA level oneDNN's kernels use here (dnnl_get_effective_cpu_isa).
CpuIsa onednn_isa();
/// oneDNN's name for it ("avx512_core_bf16").
std::string onednn_isa_name();

/// What OpenBLAS runs and why: the core, whether encore re-selected it at load (and from what),
/// or why it could not.
struct BlasCore {
  std::string core;      // openblas_get_corename()
  std::string detected;  // the core OpenBLAS chose itself at load
  std::string note;      // why it was kept or changed
};
BlasCore blas_core();

/// "OpenBLAS Cooperlake (AVX-512 BF16), oneDNN avx512_core_bf16 (AVX-512 BF16)": the ledger's line.
std::string kernels_summary();

namespace detail {
/// Makes OpenBLAS run `core` (a name OPENBLAS_CORETYPE accepts); false when this OpenBLAS
/// cannot switch (not a DYNAMIC_ARCH build, or no such core in it). For tests.
bool use_blas_core(const std::string& core);
/// The load-time choice again: the newest core the CPU supports when OpenBLAS runs an older
/// one. For tests.
void select_blas_core();
}  // namespace detail

}  // namespace cpu
}  // namespace encore
