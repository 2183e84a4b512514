#include "core/cpu_info.h"

#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.h>
#include <strings.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

// OpenBLAS's DYNAMIC_ARCH entry points (driver/others/dynamic.c): init reads OPENBLAS_CORETYPE
// or the CPU model and points the library at one core's kernels; quit forgets the choice.
// Exported by every DYNAMIC_ARCH build since GotoBLAS2, absent from single-target builds (weak:
// then null, and the core stays).
extern "C" {
void gotoblas_dynamic_init(void) __attribute__((weak));
void gotoblas_dynamic_quit(void) __attribute__((weak));
char* openblas_get_corename(void);
}

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

// Adds per nanosecond are GHz (measured_cpu_clock_ghz()); a run the scheduler interrupts only
// reads slower, and the first runs bring the core up to speed.
double measure_clock_ghz() {
#if defined(__x86_64__)
  constexpr int64_t kAdds = int64_t{1} << 21;  // per run: about a millisecond
  const auto run = [] {
    uint64_t x = 0;
    for (int64_t i = 0; i < kAdds / 16; ++i)
      asm volatile(".rept 16\n\tadd $1, %0\n\t.endr" : "+r"(x));
    return x;
  };
  double best = 0;
  for (int r = 0; r < 12; ++r) {
    const auto start = std::chrono::steady_clock::now();
    run();
    const double ns =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, static_cast<double>(kAdds) / ns);
  }
  return best;
#else
  return 0;
#endif
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
    if (line.rfind("model name", 0) == 0)
      info.model = field(line);
    else if (line.rfind("vendor_id", 0) == 0)
      info.vendor = field(line);
    else if (line.rfind("cpu family", 0) == 0)
      family = field(line);
    else if (line.rfind("cpu MHz", 0) == 0)
      info.nominal_ghz = std::strtod(field(line).c_str(), nullptr) / 1000;
  }
  const bool zen4 = info.vendor == "AuthenticAMD" && family == "25";  // family 19h
  const bool wide = info.isa >= CpuIsa::Avx512 && !zen4;
  const int lanes = wide ? 16 : info.isa >= CpuIsa::Avx ? 8 : 4;
  info.flops_per_cycle = 2 * lanes * 2;
  info.peak_basis =
      std::string("2 FMA pipes x ") + std::to_string(lanes * 32) + "-bit" +
      (zen4 && info.isa >= CpuIsa::Avx512 ? " (Zen 4 runs AVX-512 on 256-bit pipes)" : "") +
      " x 2 flops";
  return info;
}

}  // namespace

const CpuInfo& cpu_info() {
  static const CpuInfo info = read_cpu_info();
  return info;
}

double measured_cpu_clock_ghz() {
  static const double ghz = measure_clock_ghz();  // not at load: it takes ~10 ms
  return ghz;
}

double cpu_clock_ghz() { return std::max(cpu_info().nominal_ghz, measured_cpu_clock_ghz()); }

double CpuInfo::peak_gflops(int threads) const {
  return cpu_clock_ghz() * flops_per_cycle * threads;
}

namespace cpu {

CpuIsa blas_core_isa(const std::string& core) {
  const auto is = [&](const char* n) { return strcasecmp(core.c_str(), n) == 0; };
  if (is("Cooperlake") || is("SapphireRapids")) return CpuIsa::Avx512Bf16;
  if (is("SkylakeX")) return CpuIsa::Avx512;
  if (is("Haswell") || is("Zen") || is("Excavator")) return CpuIsa::Avx2;
  if (is("Sandybridge") || is("Bulldozer") || is("Piledriver") || is("Steamroller"))
    return CpuIsa::Avx;
  return CpuIsa::Sse3;
}

CpuIsa onednn_isa() {
  const unsigned isa = dnnl_get_effective_cpu_isa();
  const auto has = [&](dnnl_cpu_isa_t level) {
    return (isa & level) == static_cast<unsigned>(level);
  };
  if (has(dnnl_cpu_isa_avx512_core_bf16)) return CpuIsa::Avx512Bf16;
  if (has(dnnl_cpu_isa_avx512_core)) return CpuIsa::Avx512;
  if (has(dnnl_cpu_isa_avx2)) return CpuIsa::Avx2;
  if (has(dnnl_cpu_isa_avx)) return CpuIsa::Avx;
  return CpuIsa::Sse3;
}

std::string onednn_isa_name() {
  switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_avx512_core_amx:
      return "avx512_core_amx";
    case dnnl_cpu_isa_avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core:
      return "avx512_core";
    case dnnl_cpu_isa_avx2_vnni:
      return "avx2_vnni";
    case dnnl_cpu_isa_avx2:
      return "avx2";
    case dnnl_cpu_isa_avx:
      return "avx";
    case dnnl_cpu_isa_sse41:
      return "sse41";
    default:
      return "other";
  }
}

namespace {

BlasCore& core_state() {
  static BlasCore state;
  return state;
}

// The OpenBLAS core for an ISA level, if this OpenBLAS has its kernels (each core's table is an
// exported symbol of a DYNAMIC_ARCH build).
std::string core_for(CpuIsa isa, bool amd) {
  const auto have = [](const char* table) { return dlsym(RTLD_DEFAULT, table) != nullptr; };
  if (isa >= CpuIsa::Avx512Bf16 && have("gotoblas_COOPERLAKE")) return "Cooperlake";
  if (isa >= CpuIsa::Avx512 && have("gotoblas_SKYLAKEX")) return "SkylakeX";
  if (isa >= CpuIsa::Avx2 && amd && have("gotoblas_ZEN")) return "Zen";
  if (isa >= CpuIsa::Avx2 && have("gotoblas_HASWELL")) return "Haswell";
  if (isa >= CpuIsa::Avx && have("gotoblas_SANDYBRIDGE")) return "Sandybridge";
  return "";
}

// At load, after OpenBLAS's own initializer (libencore depends on it): nothing else in the
// process has called it through us yet.
const bool kCoreSelected = (detail::select_blas_core(), true);

}  // namespace

BlasCore blas_core() {
  BlasCore s = core_state();
  s.core = openblas_get_corename();
  return s;
}

namespace detail {

bool use_blas_core(const std::string& core) {
  if (!gotoblas_dynamic_init || !gotoblas_dynamic_quit || core.empty()) return false;
  // OPENBLAS_CORETYPE is the only way in; the user's value is put back afterwards.
  const char* user = std::getenv("OPENBLAS_CORETYPE");
  const std::string saved = user ? user : "";
  setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
  gotoblas_dynamic_quit();
  gotoblas_dynamic_init();
  if (user)
    setenv("OPENBLAS_CORETYPE", saved.c_str(), 1);
  else
    unsetenv("OPENBLAS_CORETYPE");
  return strcasecmp(openblas_get_corename(), core.c_str()) == 0;
}

void select_blas_core() {
  BlasCore& s = core_state();
  s.detected = s.core = openblas_get_corename();
  const CpuInfo& cpu = cpu_info();
  if (const char* user = std::getenv("OPENBLAS_CORETYPE")) {
    s.note = std::string("OPENBLAS_CORETYPE=") + user + " (kept)";
    return;
  }
  if (blas_core_isa(s.core) >= cpu.isa) {
    s.note = "OpenBLAS's own choice";
    return;
  }
  const std::string target = core_for(cpu.isa, cpu.vendor == "AuthenticAMD");
  if (!gotoblas_dynamic_init) {
    s.note = "not a DYNAMIC_ARCH build: its core cannot be changed";
  } else if (target.empty() || blas_core_isa(target) <= blas_core_isa(s.core)) {
    s.note = "this OpenBLAS has no newer core for this CPU";
  } else if (use_blas_core(target)) {
    s.note = "re-selected by encore at load from cpuid (OpenBLAS chose " + s.detected + ")";
  } else {
    use_blas_core(s.detected);
    s.note = "re-selecting " + target + " failed";
  }
  s.core = openblas_get_corename();
}

}  // namespace detail

std::string kernels_summary() {
  return "OpenBLAS " + blas_core().core + " (" + name(blas_core_isa(blas_core().core)) +
         "), oneDNN " + onednn_isa_name() + " (" + name(onednn_isa()) + ")";
}

}  // namespace cpu
}  // namespace encore
