// Facts about this run that need no GPU: the time, the hetplan version, the base provenance.
#pragma once

#include <string>

#include "costmodel/calibration.h"
#include "profiler/common/options.h"

namespace hetplan::profiler {

// Current UTC time as ISO 8601: "2026-11-22T10:15:03Z".
std::string utc_now_iso();
// Provenance fields known without a GPU: source "measured", host, date, command, version.
Provenance base_provenance(const CalibrateOptions& options, const std::string& host);

}  // namespace hetplan::profiler
