// Merging calibration files into one: several ranks' or runs' files of one node kind, or the node
// kinds and networks of a whole cluster (`hetplan merge`). The rules are in docs/formats.md.
#pragma once

#include <vector>

#include "costmodel/calibration.h"

namespace hetplan {

// Merges `files` in order. Communication measurements are tagged with their file's GPU kind first;
// of two measurements with the same key a successful one replaces a failed one, otherwise the later
// file's wins (a re-measurement replaces the old one). GEMM, kernel and layer measurements are
// appended; they keep their GPU only through the file's context, so the files that hold them (or
// datasheet priors) must name one GPU type and one source (InputError otherwise, naming the files).
// The provenance is that of the first file with such measurements (else the first file's), the
// others are listed in context.notes, every file's citations are kept; GPU type and name are
// cleared when communication-only files of several kinds are merged (a cluster).
CalibrationFile merge_calibration_files(const std::vector<CalibrationFile>& files);

}  // namespace hetplan
