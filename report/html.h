// The report page: one self-contained HTML file (style, Apache ECharts and the page's script
// inlined) showing the report document of report/report_data.h.
#pragma once

#include <string>

#include "costmodel/document.h"

namespace hetplan {

std::string render_report_html(const Json& data);

}  // namespace hetplan
