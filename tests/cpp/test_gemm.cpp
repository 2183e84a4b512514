// The CPU GEMM paths (ops/cpu/gemm.*): every one runs kernels made for this CPU, says so in
// show_config, and computes what float64 loops compute, eager and traced alike.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <string>

#include "core/allocator.h"
#include "core/cpu_info.h"
#include "core/ledger.h"
#include "helpers.h"
#include "ops/build_info.h"
#include "ops/cpu/gemm.h"

namespace encore {
namespace {

using test::bitwise_equal;

// (M, K) @ (K, N) of the operands' float32 values in float64 loops, and the bound a float32
// product may differ from it: k roundings of terms no larger than sum |a||b|.
struct Reference {
  Tensor value, bound;
};
Reference reference(const Tensor& a, const Tensor& b) {
  const Tensor a64 = a.to(DType::Float64).contiguous(), b64 = b.to(DType::Float64).contiguous();
  const int64_t m = a.shape()[0], k = a.shape()[1], n = b.shape()[1];
  const auto x = a64.to_vector<double>(), y = b64.to_vector<double>();
  std::vector<double> v(m * n), bound(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0, abs = 0;
      for (int64_t p = 0; p < k; ++p) {
        s += x[i * k + p] * y[p * n + j];
        abs += std::fabs(x[i * k + p] * y[p * n + j]);
      }
      v[i * n + j] = s;
      bound[i * n + j] = 2 * (k + 2) * 6e-8 * abs + 1e-30;
    }
  return {from_vector(v, Shape{m, n}), from_vector(bound, Shape{m, n})};
}

void expect_matches(const Tensor& got, const Reference& ref, const std::string& what) {
  ASSERT_EQ(got.shape(), ref.value.shape()) << what;
  const auto g = got.to_vector<double>(), r = ref.value.to_vector<double>(),
             b = ref.bound.to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i)
    ASSERT_LE(std::fabs(g[i] - r[i]), b[i])
        << what << " at " << i << ": " << g[i] << " vs " << r[i];
}

// A float32 GEMM after a re-selection of OpenBLAS's core still computes the product.
void expect_gemm_correct(const std::string& what) {
  const Tensor a = test::rand32({67, 129}, 3), b = test::rand32({129, 45}, 4);
  expect_matches(matmul(a, b), reference(a, b), what);
}

TEST(Gemm, OpenBlasRunsTheNewestCoreTheCpuSupports) {
  if (std::getenv("OPENBLAS_CORETYPE"))
    GTEST_SKIP() << "OPENBLAS_CORETYPE set: the user's choice is kept";
  const cpu::BlasCore core = cpu::blas_core();
  EXPECT_GE(cpu::blas_core_isa(core.core), cpu_info().isa)
      << core.core << " on " << name(cpu_info().isa) << ": " << core.note;
  EXPECT_GE(cpu::onednn_isa(), cpu_info().isa) << cpu::onednn_isa_name();
  EXPECT_EQ(show_config().find("warning:"), std::string::npos) << show_config();
  expect_gemm_correct("at load");
}

// What Debian's OpenBLAS 0.3.21 did on a Xeon newer than itself: it ran its SSE3 "Prescott"
// kernels. show_config warns, and the load-time selection puts the CPU's core back.
TEST(Gemm, AnOldCoreIsReportedAndReplaced) {
  if (std::getenv("OPENBLAS_CORETYPE"))
    GTEST_SKIP() << "OPENBLAS_CORETYPE set: the user's choice is kept";
  if (cpu_info().isa <= CpuIsa::Sse3) GTEST_SKIP() << "no newer ISA than Prescott's here";
  const std::string before = cpu::blas_core().core;
  if (!cpu::detail::use_blas_core("Prescott")) GTEST_SKIP() << "this OpenBLAS cannot switch cores";
  EXPECT_EQ(cpu::blas_core().core, "Prescott");
  expect_gemm_correct("on Prescott");
  const std::string config = show_config();
  EXPECT_NE(config.find("warning: OpenBLAS runs its Prescott kernels (SSE3) on a CPU with "),
            std::string::npos)
      << config;
  cpu::detail::select_blas_core();
  EXPECT_EQ(cpu::blas_core().core, before);
  EXPECT_NE(cpu::blas_core().note.find(
                "re-selected by encore at load from cpuid (OpenBLAS chose Prescott)"),
            std::string::npos)
      << cpu::blas_core().note;
  EXPECT_EQ(show_config().find("warning:"), std::string::npos) << show_config();
  expect_gemm_correct("after the re-selection");
}

TEST(Gemm, ShowConfigNamesEachPathsKernelAndIsa) {
  const std::string config = show_config();
  for (const char* expected :
       {"\nkernels:\n  CPU: ", "\n  GEMM, OpenBLAS core ", "\n  GEMM, oneDNN "})
    EXPECT_NE(config.find(expected), std::string::npos) << expected << " in\n" << config;
  EXPECT_NE(config.find(std::string("(") + name(cpu_info().isa) + ")"), std::string::npos)
      << config;
  const std::string table = Ledger::global().table();
  EXPECT_NE(table.find("\ngemm_kernels       OpenBLAS " + cpu::blas_core().core + " ("),
            std::string::npos)
      << table;
}

TEST(Gemm, CpuInfoGivesAPeak) {
  const CpuInfo& cpu = cpu_info();
  EXPECT_GE(cpu.flops_per_cycle, 16);
  const double ghz = cpu_clock_ghz();
  EXPECT_EQ(ghz, std::max(cpu.nominal_ghz, measured_cpu_clock_ghz()));
  if (ghz > 0) {
    EXPECT_NEAR(cpu.peak_gflops(2), 2 * ghz * cpu.flops_per_cycle, 1e-9);
  }
#if defined(__x86_64__)
  // No x86 core of this century runs below 0.5 GHz or above 7 (the record is about 9, with
  // liquid nitrogen); a number outside says the timed chain is not one add per cycle.
  EXPECT_GT(measured_cpu_clock_ghz(), 0.5);
  EXPECT_LT(measured_cpu_clock_ghz(), 7.0);
#endif
}

// Random shapes, 1-row and odd sizes, operands as they lie, transposed or rows of a wider
// matrix (a leading dimension larger than the row): matmul against float64 loops, and a traced
// call bitwise equal to the eager one.
TEST(Gemm, MatmulAgreesWithFloat64OnRandomShapesAndLayouts) {
  std::mt19937 rng(29);
  const int64_t sizes[] = {1, 2, 3, 7, 16, 17, 31, 64, 65, 128, 129, 257};
  auto pick = [&] { return sizes[rng() % std::size(sizes)]; };
  for (int trial = 0; trial < 40; ++trial) {
    const int64_t m = trial < 4 ? 1 : pick(), n = pick(), k = pick();
    const int layout_a = rng() % 3, layout_b = rng() % 3;
    // layout 0: contiguous; 1: the transpose of a contiguous (cols, rows) tensor; 2: the first
    // columns of a wider matrix.
    auto make = [&](int64_t rows, int64_t cols, int layout, uint64_t seed) {
      if (layout == 1) return test::rand32({cols, rows}, seed).transpose(0, 1);
      if (layout == 2) return test::rand32({rows, cols + 5}, seed).slice(1, 0, cols);
      return test::rand32({rows, cols}, seed);
    };
    const Tensor a = make(m, k, layout_a, 2 * trial + 1), b = make(k, n, layout_b, 2 * trial + 2);
    const std::string what =
        detail::cat("(", m, ", ", k, ") @ (", k, ", ", n, "), layouts ", layout_a, layout_b);
    const Tensor eager = matmul(a, b);
    expect_matches(eager, reference(a, b), what);
    auto traced = trace([](const Tensor& x, const Tensor& y) { return matmul(x, y); });
    for (int call = 0; call < 3; ++call)  // eager, trace, replay
      EXPECT_TRUE(bitwise_equal(traced(a, b), eager)) << what << ", call " << call;
  }
}

// matmul's two CPU paths: the BLAS below 2^20 multiply-adds, oneDNN's matmul (prepared per shape
// and layout: a setup in the ledger) from there, on contiguous, transposed and sliced operands,
// against float64, eager and traced bitwise equal. The large shapes are the Dense backward's of
// the flatten model (gy @ w^T and x^T @ gy), where oneDNN runs 0.56-0.88x the BLAS's time.
TEST(Gemm, MatmulTakesOneDnnFromItsThresholdOnEveryLayout) {
  const int64_t shapes[][3] = {{32, 64, 511}, {32, 64, 512}, {32, 64, 12800}, {64, 32, 12800}};
  Ledger& ledger = Ledger::global();
  for (const auto& s : shapes) {
    const int64_t m = s[0], k = s[1], n = s[2];
    const bool onednn = m * n * k >= (int64_t{1} << 20);
    for (int layout = 0; layout < 3; ++layout) {
      const Tensor a = layout == 1   ? test::rand32({k, m}, 11).transpose(0, 1)
                       : layout == 2 ? test::rand32({m, k + 3}, 11).slice(1, 0, k)
                                     : test::rand32({m, k}, 11);
      const Tensor b =
          layout == 1 ? test::rand32({n, k}, 12).transpose(0, 1) : test::rand32({k, n}, 12);
      const std::string what =
          detail::cat("(", m, ", ", k, ") @ (", k, ", ", n, "), layout ", layout);
      release_cached_memory();  // a fresh setup per layout, so that it is counted
      const int64_t setups = ledger.get(Counter::Autotunes);
      const Tensor eager = matmul(a, b);
      EXPECT_EQ(ledger.get(Counter::Autotunes) - setups, onednn ? 1 : 0) << what;
      expect_matches(eager, reference(a, b), what);
      auto traced = trace([](const Tensor& x, const Tensor& y) { return matmul(x, y); });
      for (int call = 0; call < 3; ++call)
        EXPECT_TRUE(bitwise_equal(traced(a, b), eager)) << what << ", call " << call;
    }
  }
}

// Dense's two CPU paths (the BLAS per block of rows; oneDNN's matmul from 2^20 multiply-adds)
// against float64 loops plus the bias, eager and traced bitwise equal.
TEST(Gemm, DenseAgreesWithFloat64OnBothPaths) {
  const int64_t shapes[][3] = {{1, 9, 5},      {33, 17, 3},    {300, 31, 70},
                               {32, 1024, 64}, {1, 2048, 513}, {517, 129, 65}};
  for (const auto& s : shapes) {
    const int64_t rows = s[0], k = s[1], n = s[2];
    const Tensor x = test::rand32({rows, k}, 7), w = test::rand32({k, n}, 8),
                 b = test::rand32({n}, 9);
    const std::string what =
        "dense " + std::to_string(rows) + "x" + std::to_string(k) + "->" + std::to_string(n);
    Reference ref = reference(x, w);
    ref.value = ref.value + b.to(DType::Float64);
    const Tensor eager = dense(x, w, b, Activation::Linear);
    expect_matches(eager, ref, what);
    auto traced = trace([](const Tensor& x, const Tensor& w, const Tensor& b) {
      return dense(x, w, b, Activation::Linear);
    });
    for (int call = 0; call < 3; ++call)
      EXPECT_TRUE(bitwise_equal(traced(x, w, b), eager)) << what << ", call " << call;
  }
}

}  // namespace
}  // namespace encore
