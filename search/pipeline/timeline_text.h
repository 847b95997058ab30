// A compact ASCII picture of a simulated timeline, one row per device, for terminals and docs.
#pragma once

#include <string>

#include "search/pipeline/schedule.h"

namespace hetplan::pipeline {

// Rows of at most `max_columns` cells. A cell shows the pass running at its start: F, B, W for the
// first chunk on a device and f, b, w for the others; '.' is idle. When a cell spans less than the
// shortest pass, the picture is exact: every pass shows as a run of its letter.
std::string render_timeline(const PipelineResult& result, int devices, int max_columns);

}  // namespace hetplan::pipeline
