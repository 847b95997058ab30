// Progress of a calibration on stderr: a bar redrawn in place with the measurement count and an
// ETA on a terminal; plain lines (at most one every few seconds, and at each section start) when
// stderr is a file or a pipe. The ETA is the estimated seconds of the items still to do, scaled by
// how the finished items' real time compared with their estimates.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

namespace hetplan::profiler {

// Formats seconds briefly: "0.4s", "45s", "4m02s", "1h05m".
std::string format_duration(double seconds);

class Progress {
 public:
  using Clock = std::function<double()>;  // seconds, monotonic

  // `out` may be null (silent); `clock` defaults to the steady clock.
  Progress(std::FILE* out, bool tty, Clock clock = {});

  // Adds planned items (each section adds its own; collectives may plan after the others).
  void add_planned(int64_t items, double estimate_s);
  // A section starts: plain mode prints a line; the bar shows the name.
  void start_section(const std::string& name);
  // One item finished (measured or failed) after its estimate was `estimate_s`.
  void finished(const std::string& label, double estimate_s, bool failed = false);
  // Prints a line of text above the bar (warnings, failures).
  void message(const std::string& text);
  // Ends the bar with a final line.
  void finish();

  int64_t done() const { return done_; }
  int64_t failed() const { return failed_; }
  int64_t planned() const { return planned_; }
  // Seconds still expected, from the estimates scaled by real/estimated time so far.
  double eta_s() const;
  // The status text: "[#####.....]  12/40  30%  1m02s elapsed, ETA 2m20s  <label>".
  std::string status_line() const;

 private:
  void draw(bool force);
  double now() const;

  std::FILE* out_;
  bool tty_;
  Clock clock_;
  double start_s_ = 0;
  double last_line_s_ = -1e9;
  int64_t planned_ = 0, done_ = 0, failed_ = 0;
  double planned_estimate_s_ = 0;
  double done_estimate_s_ = 0;
  std::string section_, label_;
  size_t drawn_width_ = 0;
};

}  // namespace hetplan::profiler
