#include "profiler/common/run_info.h"

#include <ctime>

#include <fmt/format.h>

#include "costmodel/version.h"

namespace hetplan::profiler {

std::string utc_now_iso() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

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
