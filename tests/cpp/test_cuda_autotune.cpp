// The autotune store: policies, visible choices, save/load. The file-format and CPU-primitive
// tests run in every build; the cuDNN ones need a GPU.
#include <cstdio>
#include <fstream>
#include <map>

#include "core/ledger.h"
#include "graph/plan.h"
#include "graph/trace.h"
#include "helpers.h"
#include "ops/autotune.h"

namespace encore {
namespace {

using test::rand64;

using test::kGpu;

std::string temp_path(const char* name) {
  return (testing::TempDir().empty() ? std::string("/tmp/") : testing::TempDir()) + name;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
}

std::vector<autotune::Entry> entries_of(const std::string& backend) {
  std::vector<autotune::Entry> out;
  for (const autotune::Entry& e : autotune::entries())
    if (e.backend == backend) out.push_back(e);
  return out;
}

class Autotune : public testing::Test {
 protected:
  void SetUp() override { autotune::clear(); }
  void TearDown() override {
    autotune::set_policy(autotune::Policy::Heuristic);
    autotune::clear();
  }
};

TEST_F(Autotune, PolicyNames) {
  for (auto p : {autotune::Policy::Heuristic, autotune::Policy::Exhaustive, autotune::Policy::Off})
    EXPECT_EQ(autotune::parse_policy(std::string(autotune::name(p))), p);
  EXPECT_THROW(autotune::parse_policy("fastest"), ValueError);
  EXPECT_EQ(autotune::policy(), autotune::Policy::Heuristic);
}

TEST_F(Autotune, CpuPrimitivesAreListed) {
  conv1d(test::rand32({2, 19, 3}, 1), test::rand32({4, 3, 5}, 2), 2, Padding::same());
  bool found = false;
  for (const autotune::Entry& e : entries_of("onednn"))
    found |= e.op == "conv1d" && e.key.find("L=19") != std::string::npos && !e.algorithm.empty();
  EXPECT_TRUE(found);
}

TEST_F(Autotune, RejectsForeignAndMalformedFiles) {
  const std::string path = temp_path("encore_autotune_bad.txt");
  write_file(path, "encore-autotune 2\ncudnn 12345\n");
  try {
    autotune::load(path);
    ADD_FAILURE() << "a file from another cuDNN version was accepted";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("cuDNN 1.23.45"), std::string::npos) << e.what();
  }
  write_file(path, "something else\n");
  EXPECT_THROW(autotune::load(path), ValueError);
  const std::string header =
      "encore-autotune 2\ncudnn " + std::to_string(autotune::detail::backend_version()) + "\n";
  write_file(path, header + "conv1d\tkey\tGEMM\tfma\t1.0\n");
  EXPECT_THROW(autotune::load(path), ValueError);
  write_file(path, header + "conv1d\tkey\tjit:avx2\t\t1.0\t0\texhaustive\tmkl\n");
  EXPECT_THROW(autotune::load(path), ValueError);  // unknown backend
  write_file(path, header + "conv1d\tkey\tjit:avx2\t\tfast\t0\texhaustive\tonednn\n");
  EXPECT_THROW(autotune::load(path), ValueError);  // bad time
  write_file(path, "encore-autotune 1\ncudnn 0\n");
  EXPECT_THROW(autotune::load(path), ValueError);  // the format before CPU choices were saved
  EXPECT_THROW(autotune::load(temp_path("encore_autotune_missing.txt")), FileError);
  std::remove(path.c_str());
}

TEST_F(Autotune, EmptyRoundTrip) {
  const std::string path = temp_path("encore_autotune_empty.txt");
  autotune::save(path);
  EXPECT_NO_THROW(autotune::load(path));
  EXPECT_TRUE(entries_of("cudnn").empty());
  std::remove(path.c_str());
}

// Forward and both backward convolutions of one shape on the CPU, channels-heavy enough that
// oneDNN offers several implementations; returns y and both gradients.
std::vector<Tensor> run_cpu_conv() {
  Tensor x = test::rand32({4, 48, 64}, 2).set_requires_grad(),
         w = test::rand32({12, 64, 64}, 1).set_requires_grad();
  Tensor y = conv1d(x, w, 1, Padding::same());
  sum(y * y).backward();
  return {y.detach(), x.grad(), w.grad()};
}

TEST_F(Autotune, CpuPoliciesChooseAsDocumented) {
  Ledger& ledger = Ledger::global();
  std::map<std::string, std::vector<autotune::Entry>> by_policy;
  std::map<std::string, std::vector<Tensor>> results;
  for (auto policy :
       {autotune::Policy::Exhaustive, autotune::Policy::Heuristic, autotune::Policy::Off}) {
    const std::string name(autotune::name(policy));
    SCOPED_TRACE(name);
    autotune::clear();
    autotune::set_policy(policy);
    const int64_t searches = ledger.get(Counter::Autotunes),
                  hits = ledger.get(Counter::AutotuneHits);
    results[name] = run_cpu_conv();
    EXPECT_EQ(ledger.get(Counter::Autotunes) - searches, 3);  // one per op, first time
    run_cpu_conv();
    EXPECT_EQ(ledger.get(Counter::Autotunes) - searches, 3);  // the second time only hits
    EXPECT_GE(ledger.get(Counter::AutotuneHits) - hits, 3);
    by_policy[name] = entries_of("onednn");
    ASSERT_EQ(by_policy[name].size(), 3u);
    for (const autotune::Entry& e : by_policy[name]) {
      EXPECT_EQ(e.source, name) << e.op;
      EXPECT_NE(e.key.find("L=48"), std::string::npos) << e.key;
      EXPECT_FALSE(e.algorithm.empty()) << e.op;
    }
  }
  for (size_t i = 0; i < 3; ++i) {
    const autotune::Entry& ex = by_policy["exhaustive"][i];
    SCOPED_TRACE(ex.op);
    // Exhaustive: every implementation timed, the fastest kept.
    ASSERT_FALSE(ex.timings.empty());
    double fastest = ex.timings[0].second;
    for (const auto& [impl, ms] : ex.timings) fastest = std::min(fastest, ms);
    EXPECT_EQ(ex.time_ms, fastest);
    bool listed = false;
    for (const auto& [impl, ms] : ex.timings) listed |= impl == ex.algorithm && ms == fastest;
    EXPECT_TRUE(listed) << ex.algorithm;
    // Heuristic: oneDNN's first, untimed.
    const autotune::Entry& h = by_policy["heuristic"][i];
    EXPECT_EQ(h.algorithm, ex.timings[0].first);
    EXPECT_EQ(h.time_ms, -1.0);
    EXPECT_TRUE(h.timings.empty());
    // Off: the GEMM-based implementation where oneDNN offers one.
    bool gemm_offered = false;
    for (const auto& [impl, ms] : ex.timings)
      gemm_offered |=
          impl.find("gemm") != std::string::npos && impl.find("brg") == std::string::npos;
    if (gemm_offered) {
      EXPECT_NE(by_policy["off"][i].algorithm.find("gemm"), std::string::npos)
          << by_policy["off"][i].algorithm;
    }
  }
  // Every implementation computes the same convolution.
  for (const char* other : {"exhaustive", "off"})
    for (size_t k = 0; k < 3; ++k)
      test::expect_close(results["heuristic"][k], results[other][k], 1e-3,
                         std::string(other) + " result " + std::to_string(k));
}

TEST_F(Autotune, CpuChoicesSaveClearLoadWithoutSearching) {
  autotune::set_policy(autotune::Policy::Exhaustive);
  run_cpu_conv();
  const auto before = entries_of("onednn");
  ASSERT_EQ(before.size(), 3u);
  const std::string path = temp_path("encore_autotune_cpu.txt");
  autotune::save(path);
  autotune::clear();
  EXPECT_TRUE(entries_of("onednn").empty());
  autotune::load(path);
  const auto loaded = entries_of("onednn");
  ASSERT_EQ(loaded.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(loaded[i].from_file);
    EXPECT_EQ(loaded[i].key, before[i].key);
    EXPECT_EQ(loaded[i].algorithm, before[i].algorithm);
    EXPECT_EQ(loaded[i].source, "exhaustive");
  }
  // A process that loaded the file takes the choices without timing anything.
  Ledger& ledger = Ledger::global();
  const int64_t searches = ledger.get(Counter::Autotunes), hits = ledger.get(Counter::AutotuneHits);
  run_cpu_conv();
  EXPECT_EQ(ledger.get(Counter::Autotunes), searches);
  EXPECT_EQ(ledger.get(Counter::AutotuneHits) - hits, 3);
  for (const autotune::Entry& e : entries_of("onednn")) EXPECT_TRUE(e.from_file) << e.op;
  std::remove(path.c_str());
}

TEST_F(Autotune, CpuChoiceShowsInTheGraphDump) {
  autotune::set_policy(autotune::Policy::Off);
  const Tensor w = test::rand32({3, 4, 8}, 3);
  TracedFunction f([&](const std::vector<graph::Arg>& a) {
    return std::vector<Tensor>{sum(conv1d(std::get<Tensor>(a[0]), w, 1, Padding::same()))};
  });
  f({test::rand32({2, 30, 4}, 4)});
  std::string algorithm;
  for (const autotune::Entry& e : entries_of("onednn"))
    if (e.op == "conv1d") algorithm = e.algorithm;
  ASSERT_NE(algorithm.find("gemm"), std::string::npos) << algorithm;
  const std::string dump = f.last_plan()->str();
  EXPECT_NE(dump.find("= conv1d(arg0, captured0; stride=1, dilation=1, padding=(1, 1))  (2, 30, 8) "
                      "float32  # " +
                      algorithm + "\n"),
            std::string::npos)
      << dump;
}

// Forward and both backward convolutions of one shape on the GPU.
void run_conv() {
  const Tensor x = rand64({2, 37, 6}, 1).to(DType::Float32).to(kGpu).set_requires_grad();
  const Tensor w = (rand64({4, 6, 8}, 2) * 0.3).to(DType::Float32).to(kGpu).set_requires_grad();
  sum(conv1d(x, w, 2, Padding::same(), 2)).backward();
  synchronize(kGpu);
}

TEST_F(Autotune, PoliciesChooseAndCount) {
  REQUIRE_CUDA();
  for (auto policy :
       {autotune::Policy::Heuristic, autotune::Policy::Exhaustive, autotune::Policy::Off}) {
    SCOPED_TRACE(std::string(autotune::name(policy)));
    autotune::clear();
    autotune::set_policy(policy);
    Ledger& ledger = Ledger::global();
    const int64_t searches = ledger.get(Counter::Autotunes),
                  hits = ledger.get(Counter::AutotuneHits);
    run_conv();
    EXPECT_EQ(ledger.get(Counter::Autotunes) - searches, 3);  // one per op, first time
    const auto chosen = entries_of("cudnn");
    ASSERT_EQ(chosen.size(), 3u);
    for (const autotune::Entry& e : chosen) {
      EXPECT_FALSE(e.algorithm.empty()) << e.op;
      EXPECT_EQ(e.source, autotune::name(policy)) << e.op;
      EXPECT_EQ(e.math, "fma") << e.op;  // TF32 is off by default
      EXPECT_NE(e.key.find("L=37"), std::string::npos) << e.key;
      if (policy == autotune::Policy::Exhaustive) {
        EXPECT_GE(e.time_ms, 0.0) << e.op;
      } else {
        EXPECT_EQ(e.time_ms, -1.0) << e.op;
      }
    }
    run_conv();
    EXPECT_EQ(ledger.get(Counter::Autotunes) - searches, 3);  // the second time only hits
    EXPECT_GE(ledger.get(Counter::AutotuneHits) - hits, 3);
  }
}

TEST_F(Autotune, SaveLoadRoundTrip) {
  REQUIRE_CUDA();
  autotune::set_policy(autotune::Policy::Exhaustive);
  run_conv();
  const auto before = entries_of("cudnn");
  ASSERT_EQ(before.size(), 3u);
  const std::string path = temp_path("encore_autotune.txt");
  autotune::save(path);
  autotune::clear();
  EXPECT_TRUE(entries_of("cudnn").empty());
  autotune::load(path);
  const auto after = entries_of("cudnn");
  ASSERT_EQ(after.size(), 3u);
  for (size_t i = 0; i < after.size(); ++i) {
    EXPECT_TRUE(after[i].from_file);
    EXPECT_EQ(after[i].op, before[i].op);
    EXPECT_EQ(after[i].key, before[i].key);
    EXPECT_EQ(after[i].algorithm, before[i].algorithm);
    EXPECT_EQ(after[i].math, before[i].math);
    EXPECT_EQ(after[i].workspace_bytes, before[i].workspace_bytes);
    EXPECT_NEAR(after[i].time_ms, before[i].time_ms, 1e-6);
  }
  // A process that loaded the file does not search again.
  const int64_t searches = Ledger::global().get(Counter::Autotunes);
  run_conv();
  EXPECT_EQ(Ledger::global().get(Counter::Autotunes), searches);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace encore
