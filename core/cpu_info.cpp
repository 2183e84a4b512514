#include "core/cpu_info.h"

#include <cstdlib>
#include <fstream>
#include <string>

namespace encore {

const char* name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Sse3:
      return "SSE3";
    case CpuIsa::Avx:
      return "AVX";
    case CpuIsa::Avx2:
      return "AVX2";
    case CpuIsa::Avx512:
      return "AVX-512";
    case CpuIsa::Avx512Bf16:
      return "AVX-512 BF16";
  }
  return "?";
}

namespace {

// __builtin_cpu_supports also checks that the OS saves the registers (xgetbv), which a
// hypervisor may withhold.
CpuIsa detect_isa() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  if (avx512 && __builtin_cpu_supports("avx512bf16")) return CpuIsa::Avx512Bf16;
  if (avx512) return CpuIsa::Avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return CpuIsa::Avx2;
  if (__builtin_cpu_supports("avx")) return CpuIsa::Avx;
#endif
  return CpuIsa::Sse3;
}

std::string field(const std::string& line) {
  const size_t colon = line.find(':');
  if (colon == std::string::npos) return "";
  const size_t start = line.find_first_not_of(" \t", colon + 1);
  return start == std::string::npos ? "" : line.substr(start);
}

CpuInfo read_cpu_info() {
  CpuInfo info;
  info.isa = detect_isa();
  std::ifstream in("/proc/cpuinfo");
  std::string line, family;
  while (std::getline(in, line) && !line.empty()) {  // the first processor's block
    if (line.rfind("model name", 0) == 0) info.model = field(line);
    else if (line.rfind("vendor_id", 0) == 0) info.vendor = field(line);
    else if (line.rfind("cpu family", 0) == 0) family = field(line);
    else if (line.rfind("cpu MHz", 0) == 0) info.ghz = std::strtod(field(line).c_str(), nullptr) / 1000;
  }
  const bool zen4 = info.vendor == "AuthenticAMD" && family == "25";  // family 19h
  const bool wide = info.isa >= CpuIsa::Avx512 && !zen4;
  const int lanes = wide ? 16 : info.isa >= CpuIsa::Avx ? 8 : 4;
  info.flops_per_cycle = 2 * lanes * 2;
  info.peak_basis = std::string("2 FMA pipes x ") + std::to_string(lanes * 32) + "-bit" +
                    (zen4 && info.isa >= CpuIsa::Avx512 ? " (Zen 4 runs AVX-512 on 256-bit pipes)" : "") +
                    " x 2 flops at " + std::to_string(info.ghz).substr(0, 5) + " GHz";
  return info;
}

}  // namespace

const CpuInfo& cpu_info() {
  static const CpuInfo info = read_cpu_info();
  return info;
}

}  // namespace encore
