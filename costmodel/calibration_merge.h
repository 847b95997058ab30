// Merging calibration files into one: several ranks' or runs' files of one node kind, or the node
// kinds and networks of a whole cluster (`hetplan merge`). The rules are in docs/formats.md.
#pragma once

#include <vector>

#include "costmodel/calibration.h"

namespace hetplan {

// Merges `files` in order. Communication measurements are tagged with their file's GPU kind first;
// of two measurements with the same key a successful one replaces a failed one, otherwise the later
// file's wins (a re-measurement replaces the old one). GEMM, kernel and layer measurements are
// appended. The first file's provenance is kept; the others are listed in context.notes; GPU type
// and name are cleared when the files disagree (a cluster of several kinds).
CalibrationFile merge_calibration_files(const std::vector<CalibrationFile>& files);

}  // namespace hetplan
