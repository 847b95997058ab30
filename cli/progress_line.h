// Progress of a long search on stderr: one line redrawn in place ("\r") with what is done, the
// best so far and an estimate of the time left. Only on a terminal: a file or pipe (a CI log) gets
// nothing, since a line per update would fill it and "\r" lines run together there.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace hetplan::cli {

class ProgressLine {
 public:
  // Draws only when `enabled` (the caller passes !--quiet) and stderr is a terminal.
  explicit ProgressLine(bool enabled);
  ~ProgressLine();

  // `done` of `total` items; `text` follows the count ("node mixes", "candidates, best 1.2 s").
  // The estimate of the time left is the items left at the rate so far, capped by `limit_left_s`
  // (the time a --time-limit still allows; < 0 for none). Redrawn at most every 200 ms.
  void update(int64_t done, int64_t total, const std::string& text, double limit_left_s = -1);
  // Clears the line (the command's own output follows).
  void finish();

  bool active() const { return enabled_; }

 private:
  using Clock = std::chrono::steady_clock;
  bool enabled_;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_{};
  size_t width_ = 0;
};

// "0.4 s", "45 s", "4 min 02 s", "1 h 05 min".
std::string format_duration(double seconds);

}  // namespace hetplan::cli
