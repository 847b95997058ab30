#include "report/import/log_measurement.h"

#include <fmt/format.h>

#include "costmodel/errors.h"

namespace hetplan {

std::string finished_notes(const std::string& notes) {
  constexpr std::string_view kSeparator = "; ";
  if (notes.size() >= kSeparator.size() &&
      notes.compare(notes.size() - kSeparator.size(), kSeparator.size(), kSeparator) == 0)
    return notes.substr(0, notes.size() - kSeparator.size());
  return notes;
}

void record_iterations(Measurement& m, const KeptSamples& kept, int64_t oom_line,
                       const std::string& oom_note, const std::string& none_kept,
                       const std::string& origin, const LogImportOptions& options,
                       std::string& notes) {
  if (oom_line > 0) {
    m.oom = true;
    m.origin = fmt::format("{}:{}", origin, oom_line);
    notes += oom_note;
    return;
  }
  if (kept.seconds.empty()) throw InputError(origin, "", none_kept);
  m.iteration_s = summarize(kept.seconds);
  m.iteration_samples_s = kept.seconds;
  m.warmup_iterations = options.warmup_iterations;
  m.origin = fmt::format("{}:{}-{}", origin, kept.first_line, kept.last_line);
}

}  // namespace hetplan
