// The autotune store. File format (text, tab-separated fields, '#' starts a comment line):
//   encore-autotune 2
//   cudnn 91900
//   <op> <key> <algorithm> <math> <time_ms> <workspace_bytes> <source> <backend>
#include "ops/autotune.h"

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <utility>

#include "core/backend.h"
#include "core/error.h"
#include "core/file.h"

namespace encore::autotune {

namespace {

using Choices = std::map<std::pair<std::string, std::string>, Entry>;
std::mutex g_mutex;
Choices g_entries;
std::atomic<Policy> g_policy{Policy::Heuristic};
std::atomic<uint64_t> g_generation{1};

constexpr const char* kMagic = "encore-autotune";
constexpr int kFormat = 2;
thread_local bool t_reused = false;

std::string version_str(size_t v) {
  if (v == 0) return "none";
  // cuDNN 9 encodes major * 10000 + minor * 100 + patch.
  return encore::detail::cat(v / 10000, ".", v / 100 % 100, ".", v % 100);
}

bool usable(const Entry& e, Policy p) {
  switch (p) {
    case Policy::Off:
      return e.source == "off";
    case Policy::Heuristic:
      return e.source == "heuristic" || e.source == "exhaustive";
    case Policy::Exhaustive:
      return e.source == "exhaustive";
  }
  return false;
}

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> fields;
  size_t start = 0;
  for (;;) {
    const size_t tab = line.find('\t', start);
    fields.push_back(
        line.substr(start, tab == std::string::npos ? std::string::npos : tab - start));
    if (tab == std::string::npos) return fields;
    start = tab + 1;
  }
}

}  // namespace

void set_policy(Policy p) {
  g_policy.store(p);
  g_generation.fetch_add(1);
}
Policy policy() { return g_policy.load(); }

std::string_view name(Policy p) {
  switch (p) {
    case Policy::Heuristic:
      return "heuristic";
    case Policy::Exhaustive:
      return "exhaustive";
    case Policy::Off:
      return "off";
  }
  return "?";
}

Policy parse_policy(const std::string& s) {
  for (Policy p : {Policy::Heuristic, Policy::Exhaustive, Policy::Off})
    if (s == name(p)) return p;
  throw ValueError("[autotune] unknown policy '" + s + "' (expected heuristic, exhaustive or off)");
}

std::vector<Entry> entries() {
  std::vector<Entry> out;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    for (const auto& [k, e] : g_entries) out.push_back(e);
  }
  return out;
}

void save(const std::string& path) {
  std::ostringstream f;
  f << kMagic << ' ' << kFormat << '\n';
  f << "cudnn " << detail::backend_version() << '\n';
  f << "# op\tkey\talgorithm\tmath\ttime_ms\tworkspace_bytes\tsource\tbackend\n";
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    for (const auto& [k, e] : g_entries) {
      std::ostringstream t;
      t.precision(9);
      t << e.time_ms;
      f << e.op << '\t' << e.key << '\t' << e.algorithm << '\t' << e.math << '\t' << t.str() << '\t'
        << e.workspace_bytes << '\t' << e.source << '\t' << e.backend << '\n';
    }
  }
  write_file(path, f.str(), "autotune.save");
}

void load(const std::string& path) {
  std::istringstream f(read_file(path, "autotune.load"));
  std::string line;
  std::string magic;
  int format = 0;
  ENCORE_CHECK(std::getline(f, line) && (std::istringstream(line) >> magic >> format) &&
                   magic == kMagic && format == kFormat,
               ValueError, "[autotune] ", path, " is not an encore autotune file (format ", kFormat,
               ")");
  std::string word;
  size_t version = 0;
  ENCORE_CHECK(
      std::getline(f, line) && (std::istringstream(line) >> word >> version) && word == "cudnn",
      ValueError, "[autotune] ", path, ": line 2 must name the cuDNN version");
  const size_t ours = detail::backend_version();
  ENCORE_CHECK(version == ours, ValueError, "[autotune] ", path, " was written with cuDNN ",
               version_str(version), " but this process uses cuDNN ", version_str(ours),
               ": algorithm choices do not carry over between versions; delete the file or tune "
               "again and save");
  std::vector<Entry> loaded;
  for (int number = 3; std::getline(f, line); ++number) {
    if (line.empty() || line[0] == '#') continue;
    const std::vector<std::string> fields = split_tabs(line);
    ENCORE_CHECK(fields.size() == 8, ValueError, "[autotune] ", path, ":", number,
                 ": expected 8 tab-separated fields, got ", fields.size());
    Entry e;
    e.op = fields[0];
    e.key = fields[1];
    e.algorithm = fields[2];
    e.math = fields[3];
    e.source = fields[6];
    e.backend = fields[7];
    e.from_file = true;
    try {
      e.time_ms = std::stod(fields[4]);
      e.workspace_bytes = static_cast<size_t>(std::stoull(fields[5]));
    } catch (const std::exception&) {
      throw ValueError(
          encore::detail::cat("[autotune] ", path, ":", number, ": bad time or workspace size"));
    }
    ENCORE_CHECK(e.source == "heuristic" || e.source == "exhaustive" || e.source == "off",
                 ValueError, "[autotune] ", path, ":", number, ": unknown source '", e.source, "'");
    ENCORE_CHECK(e.backend == "cudnn" || e.backend == "onednn", ValueError, "[autotune] ", path,
                 ":", number, ": unknown backend '", e.backend, "'");
    loaded.push_back(std::move(e));
  }
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    for (Entry& e : loaded) g_entries[{e.op, e.key}] = std::move(e);
  }
  g_generation.fetch_add(1);
}

void clear() {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_entries.clear();
  }
  g_generation.fetch_add(1);
}

namespace detail {

std::optional<Entry> find(const std::string& op, const std::string& key) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_entries.find({op, key});
  if (it == g_entries.end() || !usable(it->second, policy())) return std::nullopt;
  return it->second;
}

void store(Entry e) {
  for (std::string* s : {&e.op, &e.key, &e.algorithm, &e.math, &e.source})
    for (char& ch : *s)
      if (ch == '\t' || ch == '\n') ch = ' ';
  std::lock_guard<std::mutex> lock(g_mutex);
  g_entries[{e.op, e.key}] = std::move(e);
}

std::shared_ptr<void> swap_choices(std::shared_ptr<void> choices) {
  auto next = choices ? std::move(*static_cast<Choices*>(choices.get())) : Choices{};
  std::lock_guard<std::mutex> lock(g_mutex);
  auto previous = std::make_shared<Choices>(std::move(g_entries));
  g_entries = std::move(next);
  return previous;
}

void note_reused() { t_reused = true; }
bool take_reused() { return std::exchange(t_reused, false); }

uint64_t generation() { return g_generation.load(); }
size_t backend_version() {
  Backend* cuda = backend(DeviceType::CUDA);
  return cuda ? cuda->autotune_library_version() : 0;
}

}  // namespace detail

}  // namespace encore::autotune
