#include "profiler/common/progress.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/format.h>

namespace hetplan::profiler {
namespace {

constexpr int kBarWidth = 24;
constexpr double kPlainLineInterval_s = 5.0;

double steady_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string format_duration(double seconds) {
  if (!(seconds >= 0) || std::isinf(seconds)) return "?";
  if (seconds < 10) return fmt::format("{:.1f}s", seconds);
  const int64_t s = static_cast<int64_t>(std::llround(seconds));
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
}

Progress::Progress(std::FILE* out, bool tty, Clock clock)
    : out_(out), tty_(tty), clock_(clock ? std::move(clock) : Clock(steady_seconds)) {
  start_s_ = now();
}

double Progress::now() const { return clock_(); }

void Progress::add_planned(int64_t items, double estimate_s) {
  planned_ += items;
  planned_estimate_s_ += estimate_s;
}

void Progress::start_section(const std::string& name) {
  section_ = name;
  label_.clear();
  if (!out_) return;
  if (tty_) {
    draw(true);
  } else {
    fmt::print(out_, "calibrate: section {}: {}\n", name, status_line());
    std::fflush(out_);
    last_line_s_ = now();
  }
}

void Progress::finished(const std::string& label, double estimate_s, bool failed) {
  ++done_;
  if (failed) ++failed_;
  done_estimate_s_ += estimate_s;
  label_ = label;
  draw(done_ == planned_);
}

double Progress::eta_s() const {
  const double left_s = std::max(0.0, planned_estimate_s_ - done_estimate_s_);
  const double elapsed = now() - start_s_;
  // Scale by how long the finished items really took against their estimates.
  const double ratio = done_estimate_s_ > 0 && done_ > 0 ? elapsed / done_estimate_s_ : 1.0;
  return left_s * ratio;
}

std::string Progress::status_line() const {
  const double frac =
      planned_ > 0
          ? std::clamp(static_cast<double>(done_) / static_cast<double>(planned_), 0.0, 1.0)
          : 0.0;
  const int filled = static_cast<int>(std::floor(frac * kBarWidth));
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kBarWidth, '.');
  std::string text =
      fmt::format("[{}] {}/{} {:>3.0f}%  {} elapsed, ETA {}", bar, done_, planned_, frac * 100,
                  format_duration(now() - start_s_), format_duration(eta_s()));
  if (failed_ > 0) text += fmt::format(", {} failed", failed_);
  if (!section_.empty()) text += "  " + section_;
  if (!label_.empty()) text += ": " + label_;
  return text;
}

void Progress::draw(bool force) {
  if (!out_) return;
  if (tty_) {
    std::string line = status_line();
    constexpr size_t kMaxWidth = 120;  // keep to one terminal line
    if (line.size() > kMaxWidth) line.resize(kMaxWidth);
    const size_t width = line.size();
    if (width < drawn_width_) line.append(drawn_width_ - width, ' ');
    fmt::print(out_, "\r{}", line);
    drawn_width_ = width;
    std::fflush(out_);
    return;
  }
  const double t = now();
  if (!force && t - last_line_s_ < kPlainLineInterval_s) return;
  fmt::print(out_, "calibrate: {}\n", status_line());
  std::fflush(out_);
  last_line_s_ = t;
}

void Progress::message(const std::string& text) {
  if (!out_) return;
  if (tty_ && drawn_width_ > 0) {
    fmt::print(out_, "\r{}\r", std::string(drawn_width_, ' '));
    drawn_width_ = 0;
  }
  fmt::print(out_, "{}\n", text);
  if (tty_ && done_ > 0) draw(true);
  std::fflush(out_);
}

void Progress::finish() {
  if (!out_) return;
  if (tty_) {
    draw(true);
    fmt::print(out_, "\n");
    drawn_width_ = 0;
  } else {
    fmt::print(out_, "calibrate: {}\n", status_line());
  }
  std::fflush(out_);
}

}  // namespace hetplan::profiler
