// SIGINT / SIGTERM during a calibration: the first one asks the run to stop after the measurement
// in flight (the file is then assembled from the journal and written); a second one ends the
// process at once (the journal, fsync'd per measurement, loses nothing).
#pragma once

namespace hetplan::profiler {

// Installs the handlers for its lifetime and restores the previous ones after.
class StopSignalGuard {
 public:
  StopSignalGuard();
  ~StopSignalGuard();
  StopSignalGuard(const StopSignalGuard&) = delete;
  StopSignalGuard& operator=(const StopSignalGuard&) = delete;

  // Whether a stop was asked for since the guard was installed.
  static bool requested();
  // Asks for a stop from code (--stop-after).
  static void request();
};

}  // namespace hetplan::profiler
