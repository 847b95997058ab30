// Files of report/assets/ embedded at build time (report/CMakeLists.txt).
#pragma once

#include <string_view>

namespace hetplan {

// The text of report/assets/<name> ("echarts/echarts.min.js", "report.js", "report.css"); empty
// for an unknown name.
std::string_view report_asset(std::string_view name);

// The vendored charting library's version (report/assets/echarts/README.md).
inline constexpr std::string_view kEchartsVersion = "6.1.0";

}  // namespace hetplan
