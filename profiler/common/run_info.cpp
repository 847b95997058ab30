#include "profiler/common/run_info.h"

#include <ctime>

#include <fmt/format.h>

#include "costmodel/utc_time.h"
#include "costmodel/version.h"

namespace hetplan::profiler {

std::string utc_now_iso() { return utc_now_iso8601(); }

Provenance base_provenance(const CalibrateOptions& options, const std::string& host) {
  Provenance p;
  p.source = "measured";
  p.host = host;
  p.date = utc_now_iso();
  p.command = options.command_line;
  p.hetplan_version = version();
  return p;
}

}  // namespace hetplan::profiler
