// The table of importers behind `hetplan import --format NAME`: training logs into measurements
// files, other tools' per-layer profiles into calibration files. Adding one is a file and a line.
#pragma once

#include <filesystem>
#include <optional>
#include <string_view>
#include <vector>

#include "costmodel/calibration.h"
#include "costmodel/measurements.h"
#include "report/import/import_options.h"
#include "report/import/profile_import.h"

namespace hetplan {

struct ImportRequest {
  std::vector<std::filesystem::path> inputs;
  LogImportOptions log;
  ProfileImportOptions profile;
};

// Exactly one of the two is set.
struct ImportResult {
  std::optional<MeasurementsFile> measurements;
  std::optional<CalibrationFile> calibration;
};

struct ImporterSpec {
  std::string_view format;  // "megatron", "deepspeed", "amp", "helix"
  std::string_view reads;   // one line for --help
  ImportResult (*run)(const ImportRequest& request);
  // The `hetplan import` options this importer reads, space-separated ("--model --tp"): another
  // one given with it would be ignored, which `hetplan import` refuses.
  std::string_view options;

  bool takes(std::string_view option) const;
};

const std::vector<ImporterSpec>& importers();
// The importer for `format`; throws InputError listing the known formats.
const ImporterSpec& find_importer(std::string_view format);

}  // namespace hetplan
