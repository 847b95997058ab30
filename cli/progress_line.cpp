#include "cli/progress_line.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

namespace hetplan::cli {

ProgressLine::ProgressLine(bool enabled) : enabled_(enabled && isatty(STDERR_FILENO) == 1) {}

ProgressLine::~ProgressLine() { finish(); }

std::string format_duration(double seconds) {
  if (seconds < 10) return fmt::format("{:.1f} s", seconds);
  const auto s = static_cast<int64_t>(seconds + 0.5);
  if (s < 60) return fmt::format("{} s", s);
  if (s < 3600) return fmt::format("{} min {:02} s", s / 60, s % 60);
  return fmt::format("{} h {:02} min", s / 3600, s % 3600 / 60);
}

void ProgressLine::update(int64_t done, int64_t total, const std::string& text,
                          double limit_left_s) {
  if (!enabled_) return;
  const auto now = Clock::now();
  if (done < total && now - last_ < std::chrono::milliseconds(200)) return;
  last_ = now;
  const double elapsed_s = std::chrono::duration<double>(now - start_).count();
  std::string eta = "estimating time left";
  if (done > 0 && done <= total) {
    double left_s = elapsed_s / static_cast<double>(done) * static_cast<double>(total - done);
    if (limit_left_s >= 0) left_s = std::min(left_s, limit_left_s);
    eta = "about " + format_duration(left_s) + " left";
  }
  const std::string line =
      fmt::format("{}/{} {}, {} elapsed, {}", done, total, text, format_duration(elapsed_s), eta);
  // Spaces over the rest of a longer line drawn before.
  fmt::print(stderr, "\r{}{}", line,
             std::string(width_ > line.size() ? width_ - line.size() : 0, ' '));
  std::fflush(stderr);
  width_ = line.size();
}

void ProgressLine::finish() {
  if (!enabled_ || width_ == 0) return;
  fmt::print(stderr, "\r{}\r", std::string(width_, ' '));
  std::fflush(stderr);
  width_ = 0;
}

}  // namespace hetplan::cli
