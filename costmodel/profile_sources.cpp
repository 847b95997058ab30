#include "costmodel/profile_sources.h"

#include <filesystem>
#include <set>

#include "costmodel/calibration_gpu_type.h"

namespace hetplan {

RunProfile run_profile(const std::vector<std::string>& extra, const ClusterSpec& cluster,
                       bool no_default) {
  std::vector<std::string> paths;
  if (!no_default) {
    const auto dir = default_calibration_dir();
    // The shipped folder counts only when it holds files (HETPLAN_CALIBRATION_DIR may name an
    // empty one); a folder given by --calibration must hold some.
    if (std::filesystem::is_directory(dir) && !json_files_under(dir).empty())
      paths.push_back(dir.string());
  }
  paths.insert(paths.end(), cluster.calibration.begin(), cluster.calibration.end());
  paths.insert(paths.end(), extra.begin(), extra.end());
  // The shipped folder, the cluster file's own files and --calibration may name a file twice:
  // it is read once (its layer records would otherwise count twice).
  const ProfileInputs in = read_profile_inputs(paths);
  require_known_gpu_types(in.calibrations, cluster);
  return {merge_fitted(in.calibrations, in.profiles, cluster.gpu_types), in.repeated};
}

std::vector<CalibrationFile> shipped_priors(const std::vector<CalibrationFile>& inputs) {
  std::set<std::string> types;
  for (const auto& f : inputs)
    if (!f.context.gpu_type.empty()) types.insert(f.context.gpu_type);
  const auto dir = default_calibration_dir();
  if (types.empty() || !std::filesystem::is_directory(dir)) return {};
  std::vector<std::filesystem::path> given;
  for (const auto& f : inputs) given.push_back(f.origin);
  std::vector<CalibrationFile> out;
  for (auto& f : read_profile_inputs({dir.string()}).calibrations) {
    if (f.context.source != "datasheet" || !types.count(f.context.gpu_type)) continue;
    std::vector<std::filesystem::path> paths = given;
    paths.push_back(f.origin);
    const auto repeats = repeated_inputs(paths);
    if (repeats.empty() || repeats.back().index != given.size()) out.push_back(f);
  }
  return out;
}

}  // namespace hetplan
