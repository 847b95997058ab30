// What the training-log importers (Megatron-LM, DeepSpeed) share once a log is parsed: the
// iteration times kept after the warm-up, the measurement's ending (times, or the out-of-memory
// line), its notes, and one measurements file from many logs.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "costmodel/measurements.h"
#include "report/import/import_options.h"
#include "report/import/log_text.h"

namespace hetplan {

// Iteration times kept from a log, and the first and last line they came from.
struct KeptSamples {
  std::vector<double> seconds;
  int64_t first_line = 0, last_line = 0;

  void keep(double s, int64_t line) {
    seconds.push_back(s);
    if (first_line == 0) first_line = line;
    last_line = line;
  }
};

// Notes are collected as "a; b; " while importing: the text without the last separator.
std::string finished_notes(const std::string& notes);

// Records in `m` the log's out of memory (when `oom_line` > 0; `oom_note` goes into `notes`), else
// the kept times with the warm-up and the lines they cover ("file:first-last"). Throws InputError
// naming `origin` with `none_kept` when there is neither.
void record_iterations(Measurement& m, const KeptSamples& kept, int64_t oom_line,
                       const std::string& oom_note, const std::string& none_kept,
                       const std::string& origin, const LogImportOptions& options,
                       std::string& notes);

// One measurement per log into one file of `framework`: `measure(text, origin, file)` parses a
// log's text and returns its measurement (and may fill in the file's context, e.g. a version).
template <typename Measure>
MeasurementsFile measurements_from_logs(const std::vector<std::filesystem::path>& paths,
                                        const std::string& framework,
                                        const LogImportOptions& options, Measure&& measure) {
  MeasurementsFile f;
  f.context.framework = framework;
  f.context.gpu_type = options.gpu_type;
  for (const auto& path : paths) {
    const std::string origin = path.string();
    f.measurements.push_back(measure(logs::read_text_file(path), origin, f));
    f.context.inputs.push_back(origin);
  }
  return f;
}

}  // namespace hetplan
