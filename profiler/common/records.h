// Journal records of a calibration and their assembly into the calibration file. Every finished
// measurement is journalled under a key whose first segment names its list in the file:
//   gemm/...        GemmMeasurement        (the generic grid and the --layers GEMMs)
//   kernel/...      KernelMeasurement      (our kernels and the device copy probe)
//   layer/...       LayerMeasurement       (per-layer F/B/W timing)
//   collective/...  CollectiveMeasurement  (issue 6)
//   p2p/...         P2pMeasurement
//   host_device/... HostDeviceMeasurement
//   context/...     the provenance of each run that wrote to the journal (not a measurement)
//   finished/...    a run that measured (or failed) all it planned, under its context key's
//                   date and run (not a measurement; journals before 2026-11-24 have none)
// A measurement that failed is journalled under its own key as {"failed": {"what", "error"}}.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "costmodel/calibration.h"

namespace hetplan {
class Journal;
}

namespace hetplan::profiler {

// The record of a failed measurement.
Json failure_record(const std::string& what, const std::string& error);
bool is_failure_record(const Json& record);
// Whether the journal holds a successful measurement under `key`.
bool measured(const Journal& journal, const std::string& key);
// Whether `key` needs no measuring: measured, or failed when failures are not retried.
bool finished(const Journal& journal, const std::string& key, bool retry_failed);
// Journal key under which a run's provenance is kept ("context/<date>/<run>"). The date has
// whole seconds, so `run` (the process id) tells apart two runs started in the same second (an
// interrupted run resumed at once) and the second one still finds the first.
std::string context_key(const Provenance& p, int64_t run);
// Journal key of the record a run appends once it has measured all it planned
// ("finished/<date>/<run>"): what tells `--from-journal` that the journal's last run finished.
std::string finished_key(const Provenance& p, int64_t run);

// Result of assembling a journal: the file, and records it could not read (with why).
struct Assembly {
  CalibrationFile file;
  int64_t measurements = 0;
  int64_t unreadable = 0;
  bool last_run_finished = false;  // assemble_from_journal: the journal's last run finished
};

// Builds the calibration file from every record in the journal, under `context`. Records that do
// not parse become FailedMeasurements (never an abort: a calibration keeps what it has). Earlier
// runs' provenance records (every context key but this run's, context_key(context, run)) are
// summarised in context.notes.
Assembly assemble(const Journal& journal, Provenance context, int64_t run);

// The calibration file of a journal alone, on any machine (`calibrate --from-journal`: the run was
// killed before it wrote its file, or the GPU machine is gone). Its provenance is the journal's
// last run's, with a note that says so and whether that run finished; `command_line`
// (the --from-journal command) goes in that note. Throws InputError naming the journal when it
// holds no run's provenance, when its runs measured different GPUs, when the last provenance does
// not read, or when it holds neither a measurement nor a failure.
Assembly assemble_from_journal(const Journal& journal, const std::string& command_line);

// How to complete the run of `run` (a journal's last provenance) where it ran, as a command:
// `hetplan calibrate-collectives --out OUT --resume` for a run of that command (its command line
// says so), `hetplan calibrate --out OUT --resume` otherwise.
std::string resume_command(const Provenance& run, const std::filesystem::path& out);

// One line: what the calibration file `f`, written to `path`, holds.
std::string file_summary(const CalibrationFile& f, const std::filesystem::path& path);

}  // namespace hetplan::profiler
