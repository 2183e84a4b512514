#include "train/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "core/error.h"

namespace encore::nn {

namespace {

constexpr int kWidth = 30;
constexpr double kRedrawSeconds = 0.1;

}  // namespace

std::string format_duration(double s) {
  char buf[32];
  if (s < 1e-3)
    std::snprintf(buf, sizeof buf, "%.0fus", s * 1e6);
  else if (s < 1)
    std::snprintf(buf, sizeof buf, "%.1fms", s * 1e3);
  else if (s < 60)
    std::snprintf(buf, sizeof buf, "%.1fs", s);
  else
    std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  return buf;
}

ProgressBar::ProgressBar(int verbose, std::function<void(const std::string&)> write,
                         bool interactive)
    : verbose_(verbose), write_(std::move(write)), interactive_(interactive) {
  ENCORE_CHECK(verbose >= 0 && verbose <= 2, ValueError, "[fit] verbose must be 0, 1 or 2, got ",
               verbose);
  if (!write_) write_ = [](const std::string& s) { std::cout << s << std::flush; };
}

bool ProgressBar::stdout_is_terminal() { return ::isatty(STDOUT_FILENO) == 1; }

double ProgressBar::elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void ProgressBar::start(int64_t total, const std::string& title, std::vector<std::string> names) {
  total_ = total;
  title_ = title;
  names_ = std::move(names);
  start_ = drawn_ = std::chrono::steady_clock::now();
  if (verbose_ == 1 && !title.empty()) write_(title + "\n");
}

void ProgressBar::update(int64_t done, const std::function<Logs()>& logs) {
  if (verbose_ != 1 || !interactive_) return;
  const auto now = std::chrono::steady_clock::now();
  if (std::chrono::duration<double>(now - drawn_).count() < kRedrawSeconds) return;
  drawn_ = now;
  write_(std::string("\r").append(line(done, logs(), false)));
}

void ProgressBar::finish(int64_t done, const Logs& logs) {
  if (verbose_ == 0) return;
  if (verbose_ == 2) {
    write_((title_.empty() ? std::string() : title_ + " - ")
               .append(line(done, logs, true))
               .append("\n"));
    return;
  }
  write_(std::string(interactive_ ? "\r" : "").append(line(done, logs, true)).append("\n"));
}

std::string ProgressBar::line(int64_t done, const Logs& logs, bool final) const {
  const double t = elapsed();
  std::string s;
  if (verbose_ == 1) {
    const std::string total = total_ >= 0 ? std::to_string(total_) : "?";
    s = std::string(total.size() - std::min(total.size(), std::to_string(done).size()), ' ') +
        std::to_string(done) + "/" + total;
    if (total_ > 0) {
      const int filled = static_cast<int>(kWidth * std::min(done, total_) / total_);
      std::string bar(kWidth, '.');
      std::fill(bar.begin(), bar.begin() + filled, '=');
      if (filled < kWidth && filled > 0) bar[filled - 1] = '>';
      s.append(" [").append(bar).append("]");
    }
    s.append(" ").append(format_duration(t));
  } else {
    s = format_duration(t);
  }
  if (final || total_ < 0 || done >= total_) {
    if (done > 0)
      s.append(", ").append(format_duration(t / static_cast<double>(done))).append("/step");
  } else {
    const double eta =
        t / static_cast<double>(std::max<int64_t>(done, 1)) * static_cast<double>(total_ - done);
    s.append(", ETA ").append(format_duration(eta));
  }
  auto value = [&](const std::string& name, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, " - %s: %.4f", name.c_str(), v);
    s += buf;
  };
  for (const std::string& n : names_)
    if (const auto it = logs.find(n); it != logs.end()) value(n, it->second);
  for (const auto& [n, v] : logs)
    if (std::find(names_.begin(), names_.end(), n) == names_.end()) value(n, v);
  return s;
}

}  // namespace encore::nn
