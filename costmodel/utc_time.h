// The one formatter of the current time that calibration files, reports and JSON outputs record.
#pragma once

#include <string>

namespace hetplan {

// Now in UTC as ISO 8601 to the second: "2026-12-02T03:04:05Z".
std::string utc_now_iso8601();

}  // namespace hetplan
