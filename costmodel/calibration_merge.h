// Merging calibration files into one: several ranks' or runs' files of one node kind, or the node
// kinds and networks of a whole cluster (`hetplan merge`). The rules are in docs/formats.md.
#pragma once

#include <vector>

#include "costmodel/calibration.h"

namespace hetplan {

// Appends `other`'s measurements to `into` (for merging ranks' or nodes' files). Provenance of
// `into` is kept; `other`'s is recorded in `into.context.notes`. `other`'s communication
// measurements without `gpus` are tagged with its GPU kind, so node kinds stay apart (tag `into`'s
// own with tag_measurements_with_gpu_kind before the first merge).
void merge_calibration(CalibrationFile& into, const CalibrationFile& other);
// Tags every collective, p2p and host-device measurement of `file` that has no `gpus` with its
// context's GPU kind (no-op when the context names none).
void tag_measurements_with_gpu_kind(CalibrationFile& file);

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
