#include "costmodel/calibration_gpu_type.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "costmodel/errors.h"

namespace hetplan {
namespace {

constexpr const char* kGpuTypeKey = "context.gpu_type";

bool equal_ignoring_case(const std::string& a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == y;
         });
}

// The cluster's own GPU types as a message lists them: "h900, h950", or "none".
std::string cluster_gpu_type_names(const ClusterSpec& cluster) {
  std::string names;
  for (const auto& [name, gpu] : cluster.gpu_types) names += (names.empty() ? "" : ", ") + name;
  return names.empty() ? "none" : names;
}

std::string unknown_type_message(const std::string& type, const ClusterSpec& cluster) {
  const std::string known =
      cluster.name.empty()
          ? fmt::format("a GPU preset ({})", gpu_preset_names())
          : fmt::format("a GPU preset ({}) or a GPU type the cluster {} defines ({})",
                        gpu_preset_names(), cluster.name, cluster_gpu_type_names(cluster));
  return fmt::format(
      "expected {}, found \"{}\": its measurements need the GPU's datasheet (peaks, bandwidth){}",
      known, type,
      cluster.name.empty()
          ? "; a GPU type a cluster file defines (gpu_types) is known only with that "
            "cluster file as the command's cluster (--cluster FILE)"
          : "");
}

}  // namespace

void check_gpu_type_form(const CalibrationFile& f) {
  const std::string records = per_gpu_records(f);
  if (records.empty()) return;
  const std::string& type = f.context.gpu_type;
  if (type.empty())
    throw InputError(f.origin, kGpuTypeKey,
                     fmt::format("missing: the file holds {} measurements, which belong to one GPU "
                                 "type; expected a GPU type ({}, or one a cluster file defines in "
                                 "gpu_types)",
                                 records, gpu_preset_names()));
  if (is_gpu_preset(type)) return;
  for (const auto& p : hardware_presets())
    if (p.kind == "gpu" && equal_ignoring_case(type, p.name))
      throw InputError(
          f.origin, kGpuTypeKey,
          fmt::format("expected \"{}\" (GPU types are lower case), found \"{}\"", p.name, type));
}

void require_known_gpu_types(const std::vector<CalibrationFile>& files,
                             const ClusterSpec& cluster) {
  for (const auto& f : files) {
    const std::string& type = f.context.gpu_type;
    if (per_gpu_records(f).empty() || is_gpu_preset(type) || cluster.gpu_types.count(type))
      continue;
    throw InputError(f.origin, kGpuTypeKey, unknown_type_message(type, cluster));
  }
}

}  // namespace hetplan
