// `hetplan calibrate`: runs the sections the options ask for on one GPU, journals every finished
// measurement at once, and assembles the calibration file from the journal at the end (also after
// SIGINT, SIGTERM or --stop-after, once the measurement in flight is done).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "profiler/common/options.h"

namespace hetplan::profiler {

struct CalibrationOutcome {
  std::filesystem::path file;
  int64_t planned = 0;
  int64_t resumed = 0;    // already in the journal at start
  int64_t measured = 0;   // new measurements this run
  int64_t failed = 0;     // new failures this run (recorded in the file)
  bool stopped = false;   // interrupted (signal or --stop-after): the file is partial
  bool gpu_lost = false;  // the CUDA context failed; the rest was not attempted
  std::string summary;    // one line: what the file holds
};

// Throws RuntimeFailure (no GPU, journal not writable) or InputError (bad options, a journal from
// another GPU) before any measurement; measurement failures are recorded, not thrown.
CalibrationOutcome run_calibration(const CalibrateOptions& options);

}  // namespace hetplan::profiler
