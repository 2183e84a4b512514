// How a CompareReport reads: the table (three significant digits, one column per measure) and
// the JSON that benchmarks and plots read.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "train/compare.h"

namespace encore {

namespace {

// Three significant digits, never an exponent: 1234, 13.0, 3.98, 0.0930, 0.000571 (0 below a
// nanosecond's worth of milliseconds); "-" for a value that was not measured.
std::string fmt(double v) {
  if (!std::isfinite(v)) return "-";
  const double a = std::fabs(v);
  if (a < 5e-7) return "0";
  const int decimals = a >= 100 ? 0 : std::min(6, 2 - static_cast<int>(std::floor(std::log10(a))));
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", decimals, v);
  return b;
}

std::string fixed(double v, const char* spec) {
  if (!std::isfinite(v)) return "-";
  char b[64];
  std::snprintf(b, sizeof b, spec, v);
  return b;
}

// The table's columns: a heading and what a mode's row shows. A new measure is one line here
// (and its field in ModeReport and json()).
struct Column {
  const char* head;
  std::string (*cell)(const ModeReport&);
};

const Column kColumns[] = {
    {"mode", [](const ModeReport& m) { return m.mode; }},
    {"first_ms", [](const ModeReport& m) { return fmt(m.first_call_ms); }},
    {"step_ms", [](const ModeReport& m) { return fmt(m.step_ms_median); }},
    {"speedup", [](const ModeReport& m) { return fixed(m.speedup, "%.2fx"); }},
    {"break_even",
     [](const ModeReport& m) -> std::string {
       if (m.baseline.empty()) return "-";
       return m.break_even_step < 0 ? "never" : std::to_string(m.break_even_step);
     }},
    {"kernel_ms", [](const ModeReport& m) { return fmt(m.kernel_ms); }},
    {"overhead_ms", [](const ModeReport& m) { return fmt(m.overhead_ms); }},
    {"copy_in_ms", [](const ModeReport& m) { return fmt(m.copy_in_ms); }},
    {"setups", [](const ModeReport& m) { return std::to_string(m.setups); }},
    {"setup_ms", [](const ModeReport& m) { return fmt(m.setup_ms); }},
    {"traces", [](const ModeReport& m) { return std::to_string(m.traces); }},
    {"trace_ms", [](const ModeReport& m) { return fmt(m.trace_ms_total); }},
    {"arena_KiB", [](const ModeReport& m) { return fixed(m.arena_bytes / 1024.0, "%.1f"); }},
    {"peak_KiB", [](const ModeReport& m) { return fixed(m.peak_bytes / 1024.0, "%.1f"); }},
    {"padding",
     [](const ModeReport& m) -> std::string {
       if (!m.real_elements) return "-";
       return fixed(
           100.0 * static_cast<double>(m.padding_elements) / static_cast<double>(m.real_elements),
           "%.0f%%");
     }},
};

}  // namespace

std::string CompareReport::table() const {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> head;
  for (const Column& c : kColumns) head.push_back(c.head);
  for (const ModeReport& m : modes) {
    if (!m.error.empty()) {
      rows.push_back({m.mode, "refused (see below)"});
      continue;
    }
    std::vector<std::string> row;
    for (const Column& c : kColumns) row.push_back(c.cell(m));
    rows.push_back(std::move(row));
  }
  std::vector<size_t> width(head.size());
  for (size_t c = 0; c < head.size(); ++c) {
    width[c] = head[c].size();
    for (const auto& r : rows)
      if (c < r.size() && r.size() > 2) width[c] = std::max(width[c], r[c].size());
  }
  std::string s = detail::cat("compare_modes '", name, "' on ", device, ": medians of ", steps,
                              " steps taken in turn; times in ms per step; every mode with "
                              "per-shape state of its own\n");
  auto line = [&](const std::vector<std::string>& r) {
    std::string l;
    for (size_t c = 0; c < r.size(); ++c) {
      l += r[c];
      if (c + 1 < r.size()) l += std::string(width[c] - std::min(width[c], r[c].size()) + 2, ' ');
    }
    s += l + "\n";
  };
  line(head);
  for (const auto& r : rows) line(r);
  // Data-parallel steps: what each mode communicates (a table of its own: most steps have none).
  if (std::any_of(modes.begin(), modes.end(),
                  [](const ModeReport& m) { return m.comm_calls > 0; })) {
    s += "communication per step (this rank): mode, collectives, KiB sent, engine ms, hidden by "
         "compute\n";
    for (const ModeReport& m : modes)
      if (m.error.empty())
        s += detail::cat(
            "  ", m.mode, "  ", fixed(m.comm_calls, "%.1f"), "  ",
            fixed(m.comm_bytes / 1024.0, "%.1f"), "  ", fmt(m.comm_ms), "  ",
            m.comm_ms > 0 ? fixed(100.0 * m.comm_hidden_ms / m.comm_ms, "%.0f%%") : "-", "\n");
  }
  for (const ModeReport& m : modes) {
    if (!m.error.empty()) s += m.mode + ": " + m.error + "\n";
    if (m.traces > 1 && !m.records.empty())
      s += detail::cat(m.mode, ": ", m.traces, " traces; the latest because ",
                       m.records.back().reason, "\n");
  }
  // Which implementation ran each kind of op (the first mode's first call; the report's JSON
  // has every mode's, per shape).
  if (!modes.empty() && !modes[0].algorithms.empty()) {
    std::vector<std::string> ran;
    for (const std::string& a : modes[0].algorithms) {
      const std::string op_algorithm = a.substr(0, a.rfind(" ("));
      if (std::find(ran.begin(), ran.end(), op_algorithm) == ran.end()) ran.push_back(op_algorithm);
    }
    s += modes[0].mode + " ran";
    for (size_t i = 0; i < ran.size(); ++i) s += (i ? "; " : " ") + ran[i];
    s += "\n";
  }
  s += trained ? "note: the comparison trained the model and the optimizer state (nothing was "
                 "restored)\n"
               : detail::cat("restored afterwards: ", restored.size(),
                             " tensors (parameters, optimizer state)\n");
  return s;
}

std::string CompareReport::json() const {
  using json = nlohmann::json;
  auto number = [](double v) { return std::isfinite(v) ? json(v) : json(nullptr); };
  json modes_json = json::array();
  for (const ModeReport& m : modes) {
    json records = json::array();
    for (const TraceRecord& r : m.records) {
      json causes = json::array();
      for (const RetraceCause& c : r.causes)
        causes.push_back({{"kind", std::string(kind_name(c.kind))},
                          {"arg", c.arg},
                          {"arg_name", c.arg_name},
                          {"axis", c.axis},
                          {"old", c.old_value},
                          {"new", c.new_value},
                          {"text", c.str()}});
      records.push_back({{"call", r.call},
                         {"reason", r.reason},
                         {"causes", causes},
                         {"signature", r.signature},
                         {"trace_ms", (r.trace_ns + r.optimize_ns) / 1e6},
                         {"plan_ms", r.plan_ns / 1e6},
                         {"capture_ms", (r.capture_ns + r.instantiate_ns) / 1e6},
                         {"setup_ms", r.autotune_ns / 1e6},
                         {"nodes", r.nodes},
                         {"arena_bytes", r.arena_bytes}});
    }
    json axes = json::array();
    for (const AxisValues& a : m.axis_values) {
      json counts = json::array();
      for (const auto& [v, n] : a.counts) counts.push_back({v, n});
      axes.push_back(
          {{"arg", a.arg}, {"arg_name", a.arg_name}, {"axis", a.axis}, {"counts", counts}});
    }
    modes_json.push_back({{"mode", m.mode},
                          {"baseline", m.baseline},
                          {"error", m.error},
                          {"first_call_ms", number(m.first_call_ms)},
                          {"step_ms_median", number(m.step_ms_median)},
                          {"step_ms", m.step_ms},
                          {"kernel_ms", number(m.kernel_ms)},
                          {"overhead_ms", number(m.overhead_ms)},
                          {"copy_in_ms", number(m.copy_in_ms)},
                          {"setup_ms", number(m.setup_ms)},
                          {"setups", m.setups},
                          {"calls", m.calls},
                          {"traces", m.traces},
                          {"algorithms", m.algorithms},
                          {"trace_ms_total", number(m.trace_ms_total)},
                          {"records", records},
                          {"axis_values", axes},
                          {"arena_bytes", m.arena_bytes},
                          {"peak_bytes", m.peak_bytes},
                          {"real_elements", m.real_elements},
                          {"padding_elements", m.padding_elements},
                          {"retraces_saved", m.retraces_saved},
                          {"one_off_ms", number(m.one_off_ms)},
                          {"break_even_step", m.break_even_step},
                          {"speedup", number(m.speedup)},
                          {"comm_calls", number(m.comm_calls)},
                          {"comm_bytes", number(m.comm_bytes)},
                          {"comm_ms", number(m.comm_ms)},
                          {"comm_hidden_ms", number(m.comm_hidden_ms)}});
  }
  // step_ms may hold NaN (a refused mode's first call): written as null.
  for (json& m : modes_json)
    for (json& v : m["step_ms"])
      if (v.is_number() && !std::isfinite(v.get<double>())) v = nullptr;
  return json({{"name", name},
               {"device", device},
               {"steps", steps},
               {"trained", trained},
               {"restored", restored},
               {"modes", modes_json}})
      .dump(2);
}

}  // namespace encore
