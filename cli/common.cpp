#include "cli/common.h"

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <fmt/format.h>

#include "costmodel/calibration.h"
#include "costmodel/topology.h"

namespace hetplan::cli {

Profile load_run_profile(const std::vector<std::string>& extra, const ClusterSpec& cluster,
                         bool no_default) {
  std::vector<std::string> paths;
  if (!no_default) {
    const auto dir = default_calibration_dir();
    if (std::filesystem::is_directory(dir)) paths.push_back(dir.string());
  }
  paths.insert(paths.end(), cluster.calibration.begin(), cluster.calibration.end());
  paths.insert(paths.end(), extra.begin(), extra.end());
  return load_profile_inputs(paths);
}

Json run_context(const std::string& command, const Profile& profile) {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char date[32];
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  Json sources = Json::object();
  for (const auto& [type, fit] : profile.gpus) sources[type] = fit.source;
  return {{"hetplan_version", "0.1.0"}, {"command", command}, {"date", date},
          {"calibration", profile.origins}, {"gpu_sources", sources}};
}

std::string format_seconds(double s) {
  if (s >= 1) return fmt::format("{:.3f} s", s);
  if (s >= 1e-3) return fmt::format("{:.2f} ms", s * 1e3);
  return fmt::format("{:.1f} us", s * 1e6);
}

std::string format_gib(double bytes) { return fmt::format("{:.1f} GiB", bytes / (1ull << 30)); }

void write_json_output(const Json& j, const std::string& path) {
  if (path == "-") {
    fmt::print("{}\n", j.dump(2));
    return;
  }
  write_json_atomically(j, path);
}

std::string own_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string out;
  size_t start = 0;
  while (start < raw.size()) {
    size_t end = raw.find('\0', start);
    if (end == std::string::npos) end = raw.size();
    std::string arg = raw.substr(start, end - start);
    if (arg.find_first_of(" \t\"'") != std::string::npos) arg = "'" + arg + "'";
    out += (out.empty() ? "" : " ") + arg;
    start = end + 1;
  }
  return out;
}

std::string idle_groups_text(const ClusterSpec& cluster, const Strategy& s) {
  const std::vector<Device> devices = cluster_devices(cluster);
  std::vector<bool> used(cluster.groups.size(), false);
  for (const auto& st : s.stages)
    for (int64_t d : st.devices) used[static_cast<size_t>(devices[static_cast<size_t>(d)].group)] = true;
  std::string out;
  for (size_t g = 0; g < cluster.groups.size(); ++g) {
    const NodeGroup& group = cluster.groups[g];
    if (!used[g])
      out += fmt::format("{}{} x{} ({} GPUs)", out.empty() ? "idle: " : ", ", group.node.name,
                         group.count, group.count * group.node.gpus);
  }
  return out.empty() ? "some GPUs idle" : out;
}

}  // namespace hetplan::cli
