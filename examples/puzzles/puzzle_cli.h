// What every C++ puzzle shares (the twin of puzzle_cli.py): the common options (--device,
// --threads, --json), a clean skip when --device cuda has no GPU, the header line with the
// thread count, and the JSON file (rows, conclusion, the compare_modes reports).
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../common.h"
#include "encore.h"
#include "ops/build_info.h"

namespace examples {

inline const std::vector<std::string> kPuzzleOptions = {"device", "threads", "json"};

/// Applies --threads and returns the device; exits 0 with a message when --device cuda has
/// no GPU to run on (the puzzle's GPU variant is skipped, not failed).
inline Device puzzle_device(const Args& args) {
  if (args.flag("threads")) {
    const int64_t n = args.num("threads", 0);
    if (n < 1) usage_error(args.program(), "--threads must be at least 1");
    encore::set_num_threads(static_cast<int>(n));
  }
  const std::string d = args.get("device", "cpu");
  Device device;
  try {
    device = encore::parse_device(d);
  } catch (const std::exception& e) {
    usage_error(args.program(), std::string("--device: ") + e.what());
  }
  if (device.is_cuda() && !encore::cuda_available()) {
    std::printf("%s: skipped: --device %s: no CUDA device (%s)\n", args.program().c_str(),
                d.c_str(), encore::cuda::unavailable_reason().c_str());
    std::exit(0);
  }
  return device;
}

inline std::string puzzle_header(const std::string& title, Device device) {
  const char* wait = std::getenv("OMP_WAIT_POLICY");
  return title + " on " + device.str() + ", cpu threads " + std::to_string(encore::num_threads()) +
         " (OMP_WAIT_POLICY=" + (wait ? wait : "unset") + "), encore " + encore::version();
}

/// The rows as JSON objects (their values are JSON already).
inline nlohmann::json rows_json(const std::vector<Row>& rows) {
  nlohmann::json out = nlohmann::json::array();
  for (const Row& r : rows) {
    nlohmann::json o = nlohmann::json::object();
    for (const auto& [k, v] : r.fields) o[k] = nlohmann::json::parse(v);
    out.push_back(o);
  }
  return out;
}

/// The closing words on ways whose kernels take `kernel_share` of a call and whose per-call
/// times are `per_call`: they "converge" only where the slowest is within 25% of the fastest;
/// a wider spread than the overhead outside the kernels can explain is said to be so.
inline std::string agreement(const std::vector<double>& per_call, double kernel_share) {
  double lo = per_call.at(0), hi = per_call.at(0);
  for (double v : per_call) lo = std::min(lo, v), hi = std::max(hi, v);
  char s[256];
  if (hi <= 1.25 * lo)
    std::snprintf(s, sizeof s, "the kernels dominate and the ways converge (within %.0f%%)",
                  100 * (hi / lo - 1));
  else
    std::snprintf(s, sizeof s,
                  "the ways differ by up to %.1fx although kernels are %.0f%% of an eager call: "
                  "more than overhead can explain (the machine's load, or the kernels' own times: "
                  "compare kernel_us)",
                  hi / lo, 100 * kernel_share);
  return s;
}

inline void write_puzzle_json(const std::string& path, const nlohmann::json& payload) {
  std::ofstream(path) << payload.dump(1) << "\n";
  std::printf("wrote %s\n", path.c_str());
}

}  // namespace examples
