// The GPU type a calibration file names (context.gpu_type): whether it is well formed, and whether
// a command knows it. Every reader of calibration files asks here, so that an unknown type gets the
// same answer everywhere: an input error naming the file, the key and the known types.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "costmodel/calibration.h"
#include "costmodel/hardware.h"

namespace hetplan {

// Checks the form of `file`'s GPU type, which needs no cluster: a file with measurements of one
// GPU (per_gpu_records) names a type, and a preset's name in other letters is refused. A type that
// is no preset passes: a cluster file may define it (require_known_gpu_types judges it).
void check_gpu_type_form(const CalibrationFile& file);

// Checks that every file with measurements of one GPU names a GPU preset or a GPU type `cluster`
// defines (gpu_types): its measurements need that GPU's datasheet. InputError at
// <file>: context.gpu_type otherwise, naming the known types. `cluster` may be empty (no cluster).
void require_known_gpu_types(const std::vector<CalibrationFile>& files, const ClusterSpec& cluster);

}  // namespace hetplan
