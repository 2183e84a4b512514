// Shared pieces of the example programs: synthetic data sets generated in code, a tiny
// command line parser, timing statistics, and table / JSON output.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/threads.h"
#include "ops/ops.h"
#include "ops/tensor.h"

namespace examples {

using encore::Device;
using encore::Tensor;

/// Prints "<program>: error: <message>" and exits with status 2 (a usage error).
[[noreturn]] inline void usage_error(const std::string& program, const std::string& message) {
  std::fprintf(stderr, "%s: error: %s\n", program.c_str(), message.c_str());
  std::exit(2);
}

/// --key value pairs and --flags; anything not in `known` is a usage error, as are numbers
/// that do not parse.
class Args {
 public:
  Args(int argc, char** argv, std::vector<std::string> known) : known_(std::move(known)) {
    program_ = argc > 0 ? argv[0] : "example";
    if (const auto slash = program_.rfind('/'); slash != std::string::npos)
      program_ = program_.substr(slash + 1);
    for (int i = 1; i < argc; ++i) {
      if (std::strncmp(argv[i], "--", 2) != 0)
        usage_error(program_, std::string("unexpected argument '") + argv[i] + "'" + options());
      const std::string key(argv[i] + 2);
      if (std::find(known_.begin(), known_.end(), key) == known_.end())
        usage_error(program_, "unknown option --" + key + options());
      const bool has_value = i + 1 < argc && std::strncmp(argv[i + 1], "--", 2) != 0;
      values_[key] = has_value ? argv[++i] : "1";
    }
  }
  const std::string& program() const { return program_; }
  std::string get(const std::string& k, const std::string& def = "") const {
    auto it = values_.find(k);
    return it == values_.end() ? def : it->second;
  }
  int64_t num(const std::string& k, int64_t def) const {
    auto it = values_.find(k);
    if (it == values_.end()) return def;
    char* end = nullptr;
    const long long v = std::strtoll(it->second.c_str(), &end, 10);
    if (end == it->second.c_str() || *end)
      usage_error(program_, "--" + k + " needs an integer, got '" + it->second + "'");
    return v;
  }
  double real(const std::string& k, double def) const {
    auto it = values_.find(k);
    if (it == values_.end()) return def;
    char* end = nullptr;
    const double v = std::strtod(it->second.c_str(), &end);
    if (end == it->second.c_str() || *end)
      usage_error(program_, "--" + k + " needs a number, got '" + it->second + "'");
    return v;
  }
  bool flag(const std::string& k) const { return values_.count(k) > 0; }

 private:
  std::string options() const {
    std::string s = " (options:";
    for (const std::string& k : known_) s += " --" + k;
    return s + ")";
  }
  std::string program_;
  std::vector<std::string> known_;
  std::map<std::string, std::string> values_;
};

/// The device to run on: --device cpu|cuda; default the GPU when one is present. Asking for a
/// GPU that is not there is a usage error, not a crash later.
inline Device pick_device(const Args& args) {
  const std::string d = args.get("device", encore::cuda_available() ? "cuda" : "cpu");
  Device device;
  try {
    device = encore::parse_device(d);
  } catch (const std::exception& e) {
    usage_error(args.program(), std::string("--device: ") + e.what());
  }
  if (device.is_cuda() && !encore::cuda_available())
    usage_error(args.program(), "--device " + d + ": no CUDA device is available (" +
                                    (encore::cuda_built() ? "no GPU or driver found"
                                                          : "this build has no CUDA backend") +
                                    "); use --device cpu");
  return device;
}

/// Runs a program's body; an exception becomes "<program>: error: ..." and exit status 1.
template <class F> int guarded(const Args& args, F&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", args.program().c_str(), e.what());
    return 1;
  }
}

/// A binary classification set: does a noisy multichannel signal contain a sinusoid of the
/// target frequency (label 1), or one of a distractor frequency (label 0)? The tone appears
/// on a random third of the channels with random phase and amplitude, under unit noise.
///
/// The target period (4 steps) equals the small model's conv stride. That model has a
/// linear Conv1D followed by global average pooling, so what survives the pooling is, per
/// channel, the mean of the input over each phase of the stride; a random-phase tone averages
/// out unless its period divides the stride. The Dense layers then detect the tone's energy
/// from those phase means. (Give the conv a relu and any frequency becomes learnable.)
struct FrequencyTask {
  Tensor x;  // (n, steps, channels)
  Tensor y;  // (n, 1) in {0, 1}
};

inline FrequencyTask make_frequency_task(int64_t n, int64_t steps, int64_t channels, uint32_t seed,
                                         Device device = Device::cpu()) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> noise(0.0f, 1.0f);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  constexpr float kTarget = 0.25f;  // cycles per step
  constexpr float kDistractors[] = {0.125f, 0.1f};
  std::vector<float> x(static_cast<size_t>(n * steps * channels)), y(static_cast<size_t>(n));
  for (int64_t s = 0; s < n; ++s) {
    const bool positive = (rng() & 1u) != 0;
    y[s] = positive ? 1.0f : 0.0f;
    const float freq = positive ? kTarget : kDistractors[rng() % 2];
    for (int64_t c = 0; c < channels; ++c) {
      const bool carries = unit(rng) < 1.0f / 3.0f;
      const float amp = carries ? 0.5f + unit(rng) : 0.0f;
      const float phase = 6.2831853f * unit(rng);
      for (int64_t t = 0; t < steps; ++t)
        x[(s * steps + t) * channels + c] =
            noise(rng) + amp * std::sin(6.2831853f * freq * static_cast<float>(t) + phase);
    }
  }
  return {encore::from_vector(x, {n, steps, channels}, device),
          encore::from_vector(y, {n, 1}, device)};
}

/// The adding problem (Hochreiter & Schmidhuber): channel 0 holds random values, channel 1
/// marks two positions; the target is the sum of the two marked values.
inline FrequencyTask make_adding_task(int64_t n, int64_t steps, uint32_t seed,
                                      Device device = Device::cpu()) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n * steps * 2), 0.0f), y(static_cast<size_t>(n));
  for (int64_t s = 0; s < n; ++s) {
    const int64_t a = rng() % (steps / 2), b = steps / 2 + rng() % (steps / 2);
    for (int64_t t = 0; t < steps; ++t) x[(s * steps + t) * 2] = unit(rng);
    x[(s * steps + a) * 2 + 1] = 1.0f;
    x[(s * steps + b) * 2 + 1] = 1.0f;
    y[s] = x[(s * steps + a) * 2] + x[(s * steps + b) * 2];
  }
  return {encore::from_vector(x, {n, steps, 2}, device), encore::from_vector(y, {n, 1}, device)};
}

/// Rows [start, start + count) of a batch-first tensor.
inline Tensor rows(const Tensor& t, int64_t start, int64_t count) {
  return t.slice(0, start, start + count);
}

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// A row of a benchmark table: ordered key/value pairs, printed as text and as JSON.
struct Row {
  std::vector<std::pair<std::string, std::string>> fields;
  Row& add(const std::string& k, const std::string& v) {
    fields.emplace_back(k, "\"" + v + "\"");
    return *this;
  }
  Row& add(const std::string& k, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    fields.emplace_back(k, std::isfinite(v) ? buf : "null");
    return *this;
  }
  Row& add(const std::string& k, int64_t v) {
    fields.emplace_back(k, std::to_string(v));
    return *this;
  }
};

inline void write_json(const std::string& path, const std::vector<Row>& rows) {
  std::ofstream f(path);
  f << "[\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    f << "  {";
    for (size_t j = 0; j < rows[i].fields.size(); ++j)
      f << (j ? ", " : "") << "\"" << rows[i].fields[j].first << "\": " << rows[i].fields[j].second;
    f << "}" << (i + 1 < rows.size() ? "," : "") << "\n";
  }
  f << "]\n";
  std::printf("wrote %s\n", path.c_str());
}

/// Prints rows as an aligned table (strings unquoted), under the CPU thread count they ran with.
inline void print_table(const std::vector<Row>& rows) {
  if (rows.empty()) return;
  const char* wait = std::getenv("OMP_WAIT_POLICY");
  std::printf("cpu threads: %d (OMP_WAIT_POLICY=%s)\n", encore::num_threads(),
              wait ? wait : "unset");
  const size_t cols = rows[0].fields.size();
  std::vector<size_t> width(cols, 0);
  auto text = [](const std::string& v) {
    return v.size() >= 2 && v.front() == '"' ? v.substr(1, v.size() - 2) : v;
  };
  for (size_t c = 0; c < cols; ++c) {
    width[c] = rows[0].fields[c].first.size();
    for (const Row& r : rows) width[c] = std::max(width[c], text(r.fields[c].second).size());
  }
  for (size_t c = 0; c < cols; ++c)
    std::printf("%-*s  ", static_cast<int>(width[c]), rows[0].fields[c].first.c_str());
  std::printf("\n");
  for (const Row& r : rows) {
    for (size_t c = 0; c < cols; ++c)
      std::printf("%-*s  ", static_cast<int>(width[c]), text(r.fields[c].second).c_str());
    std::printf("\n");
  }
}

}  // namespace examples
