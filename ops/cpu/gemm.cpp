#include "ops/cpu/gemm.h"

#include <cblas.h>
#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.h>
#include <strings.h>

#include <cstdlib>
#include <sstream>

// OpenBLAS's DYNAMIC_ARCH entry points (driver/others/dynamic.c): init reads OPENBLAS_CORETYPE
// or the CPU model and points the library at one core's kernels; quit forgets the choice.
// Exported by every DYNAMIC_ARCH build since GotoBLAS2, absent from single-target builds (weak:
// then null, and the core stays).
extern "C" {
void gotoblas_dynamic_init(void) __attribute__((weak));
void gotoblas_dynamic_quit(void) __attribute__((weak));
char* openblas_get_corename(void);
}

namespace encore::cpu {

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
              k, 1.0f, a, lda, b, ldb, beta, c, ldc);
}

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
              k, 1.0, a, lda, b, ldb, beta, c, ldc);
}

CpuIsa blas_core_isa(const std::string& core) {
  const auto is = [&](const char* n) { return strcasecmp(core.c_str(), n) == 0; };
  if (is("Cooperlake") || is("SapphireRapids")) return CpuIsa::Avx512Bf16;
  if (is("SkylakeX")) return CpuIsa::Avx512;
  if (is("Haswell") || is("Zen") || is("Excavator")) return CpuIsa::Avx2;
  if (is("Sandybridge") || is("Bulldozer") || is("Piledriver") || is("Steamroller")) return CpuIsa::Avx;
  return CpuIsa::Sse3;
}

CpuIsa onednn_isa() {
  const unsigned isa = dnnl_get_effective_cpu_isa();
  const auto has = [&](dnnl_cpu_isa_t level) { return (isa & level) == static_cast<unsigned>(level); };
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
  if (user) setenv("OPENBLAS_CORETYPE", saved.c_str(), 1);
  else unsetenv("OPENBLAS_CORETYPE");
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

std::string describe_gemm() {
  const CpuInfo& cpu = cpu_info();
  const BlasCore blas = blas_core();
  const CpuIsa blas_isa = blas_core_isa(blas.core), dnnl_isa = onednn_isa();
  std::ostringstream out;
  out << "  CPU: " << cpu.model << " (" << name(cpu.isa) << "), float32 FMA peak "
      << static_cast<int>(cpu.peak_gflops(1) + 0.5) << " GFLOP/s per core (" << cpu.peak_basis << ")\n"
      << "  GEMM, OpenBLAS core " << blas.core << " (" << name(blas_isa) << "; " << blas.note
      << "): matmul, dense below 2^20 multiply-adds, recurrent kernels' gradients, float64\n"
      << "  GEMM, oneDNN " << onednn_isa_name() << " (" << name(dnnl_isa)
      << "): dense from 2^20 multiply-adds, recurrent steps, Conv1D\n";
  if (blas_isa < cpu.isa)
    out << "  warning: OpenBLAS runs its " << blas.core << " kernels (" << name(blas_isa)
        << ") on a CPU with " << name(cpu.isa) << " (" << blas.note << ")\n";
  if (dnnl_isa < cpu.isa)
    out << "  warning: oneDNN runs " << onednn_isa_name() << " kernels on a CPU with "
        << name(cpu.isa) << " (ONEDNN_MAX_CPU_ISA, or a oneDNN older than the CPU)\n";
  return out.str();
}

}  // namespace encore::cpu
