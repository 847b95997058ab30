#include "cli/common.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include <fmt/format.h>
#include <unistd.h>

#include "costmodel/atomic_file.h"
#include "costmodel/calibration.h"
#include "costmodel/errors.h"
#include "costmodel/profile_sources.h"
#include "costmodel/topology.h"

namespace hetplan::cli {

namespace {

// A GPU that hetplan's CUDA kernels cannot calibrate is predicted from its datasheet priors.
void note_uncalibratable_gpus(const ClusterSpec& cluster) {
  std::set<std::string> noted;
  for (const auto& g : cluster.groups)
    if (!g.node.gpu.calibratable() && noted.insert(g.node.gpu.name).second)
      fmt::print(stderr,
                 "note: {} is a {} GPU: hetplan's calibration kernels are CUDA-only, so its "
                 "predictions use datasheet priors (calibration_data/datasheet) or imported "
                 "measurements\n",
                 g.node.gpu.name, g.node.gpu.vendor);
}

}  // namespace

Profile load_run_profile(const std::vector<std::string>& extra, const ClusterSpec& cluster,
                         bool no_default) {
  const RunProfile run = run_profile(extra, cluster, no_default);
  for (const auto& r : run.repeated) fmt::print(stderr, "note: {}: read once\n", describe(r));
  note_uncalibratable_gpus(cluster);
  return run.profile;
}

FrameworkSpec load_run_framework(const std::string& flag, const std::string& recorded,
                                 const std::string& recorded_in) {
  if (!flag.empty() || recorded.empty())
    return load_framework(flag.empty() ? std::string(kDefaultFramework) : flag);
  try {
    return load_framework(recorded);
  } catch (const InputError& e) {
    if (recorded_in.empty() || !e.origin().empty()) throw;
    throw InputError(recorded_in, "framework", e.what());
  }
}

void write_json_output(const Json& j, const std::string& path) {
  if (path == "-") {
    fmt::print("{}\n", j.dump(2));
    return;
  }
  write_json_atomically(j, path);
}

namespace {

// The regular files an input names: itself, or every file under a folder.
std::vector<std::filesystem::path> input_files(const std::string& input) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(input, ec)) return {input};
  std::vector<fs::path> out;
  for (auto it = fs::recursive_directory_iterator(input, ec); !ec && it != fs::end(it);
       it.increment(ec))
    if (it->is_regular_file(ec)) out.push_back(it->path());
  return out;
}

}  // namespace

void check_outputs(const std::vector<std::string>& inputs,
                   const std::vector<std::pair<std::string, std::string>>& outputs) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  for (const auto& in : inputs) {
    const auto f = input_files(in);
    files.insert(files.end(), f.begin(), f.end());
  }
  std::vector<std::pair<std::string, fs::path>> seen;  // "--out p.json", canonical path
  for (const auto& [option, value] : outputs) {
    if (value.empty() || value == "-") continue;
    const fs::path out(value);
    std::error_code ec;
    const fs::file_status status = fs::status(out, ec);
    if (fs::is_directory(status))
      throw InputError(fmt::format("{} {}: a folder; expected a file to write", option, value));
    if (fs::exists(status))
      for (const auto& f : files)
        if (fs::equivalent(out, f, ec) && !ec)
          throw InputError(
              fmt::format("{} {}: also an input ({}); writing it would replace what "
                          "is being read; write elsewhere",
                          option, value, f.string()));
    const fs::path canonical = fs::weakly_canonical(out, ec);
    for (const auto& [other, path] : seen)
      if (!canonical.empty() && canonical == path)
        throw InputError(fmt::format("{} {}: the same file as {}; give two different files", option,
                                     value, other));
    seen.emplace_back(option + " " + value, canonical);
    if (fs::exists(status) && !fs::is_regular_file(status)) continue;  // a device or pipe
    // Through a symbolic link the file written is the link's target, in the target's folder.
    fs::path target;
    try {
      target = write_target(out);
    } catch (const RuntimeFailure& e) {
      throw InputError(fmt::format("{} {}: {}", option, value, e.what()));
    }
    const fs::path dir = target.parent_path().empty() ? fs::path(".") : target.parent_path();
    if (!fs::is_directory(dir, ec))
      throw InputError(
          fmt::format("{} {}: no folder {}; create it first", option, value, dir.string()));
    if (::access(dir.c_str(), W_OK) != 0)
      throw InputError(
          fmt::format("{} {}: the folder {} is not writable", option, value, dir.string()));
  }
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
  const auto use = [&](const std::vector<int64_t>& list) {
    for (int64_t d : list) used[static_cast<size_t>(devices[static_cast<size_t>(d)].group)] = true;
  };
  for (const auto& st : s.stages) {
    use(st.devices);
    for (const auto& r : st.replicas) use(r.devices);
  }
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
