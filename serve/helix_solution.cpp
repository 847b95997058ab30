#include "serve/helix_solution.h"

#include <charconv>
#include <optional>

#include <fmt/format.h>

#include "costmodel/atomic_file.h"
#include "costmodel/calibration.h"
#include "costmodel/errors.h"
#include "serve/ini_file.h"

namespace hetplan::serve {
namespace {

namespace fs = std::filesystem;

std::optional<int> parse_index(const std::string& text) {
  int x = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), x);
  if (ec != std::errc() || p != text.data() + text.size() || x < 0) return std::nullopt;
  return x;
}

constexpr std::string_view kNodePrefix = "compute_node_";

// Whether some machine of the cluster carries a Helix node name (ComputeNode-i, compute_node_N).
bool names_helix_nodes(const ServingCluster& cluster) {
  for (const auto& m : cluster.machines())
    if (m.name.rfind("ComputeNode-", 0) == 0 || m.name.rfind(kNodePrefix, 0) == 0) return true;
  return false;
}

// The machine compute_node_N names (see read_helix_solution), or -1.
int machine_of(const std::string& key, const ServingCluster& cluster, int64_t offset) {
  if (int machine = cluster.find(key); machine >= 0) return machine;
  if (key.rfind(kNodePrefix, 0) != 0) return -1;
  const auto id = parse_index(key.substr(kNodePrefix.size()));
  if (!id || *id < offset) return -1;
  if (int machine = cluster.find(fmt::format("ComputeNode-{}", *id - offset)); machine >= 0)
    return machine;
  if (!names_helix_nodes(cluster) && *id - offset < cluster.size())
    return static_cast<int>(*id - offset);
  return -1;
}

}  // namespace

Placement read_helix_solution(const fs::path& path, const ServingCluster& cluster, int num_layers) {
  const IniFile ini = IniFile::load(path);
  IniSectionReader settings(ini, "Settings");
  settings.only({"offset"});
  const int64_t offset = settings.integer("offset");
  const IniSection& solution = ini.section("Solution");
  IniSectionReader r(ini, solution);
  Placement placement;
  placement.ranges.assign(cluster.size(), LayerRange{});
  std::vector<bool> seen(cluster.size(), false);
  for (const auto& entry : solution.entries) {
    // configparser lower-cases keys; machine names in simulator files are lower case already.
    const int machine = machine_of(entry.key, cluster, offset);
    if (machine < 0)
      r.fail(entry.key, fmt::format("no machine of this name in {} (with offset {}, "
                                    "compute_node_N is ComputeNode-(N-{}))",
                                    cluster.origin(), offset, offset));
    if (seen[machine]) r.fail(entry.key, "the machine appears twice");
    seen[machine] = true;
    std::vector<int> layers;
    for (const auto& item : r.list(entry.key)) {
      const auto layer = parse_index(item);
      if (!layer || *layer >= num_layers)
        r.fail(entry.key,
               fmt::format("expected layer numbers 0..{}, found {}", num_layers - 1, item));
      layers.push_back(*layer);
    }
    if (layers.empty()) continue;
    for (size_t i = 1; i < layers.size(); ++i)
      if (layers[i] != layers[i - 1] + 1)
        r.fail(entry.key, fmt::format("expected consecutive layers (a contiguous range), found {} "
                                      "after {}",
                                      layers[i], layers[i - 1]));
    placement.ranges[machine] = {layers.front(), static_cast<int>(layers.size())};
  }
  return placement;
}

std::string helix_solution_text(const Placement& placement, const ServingCluster& cluster) {
  std::string out = fmt::format("[Settings]\noffset={}\n\n[Solution]\n", kHelixNodeOffset);
  for (int i = 0; i < cluster.size(); ++i) {
    const std::string& name = cluster.machines()[i].name;
    // A simulator file's node keeps its name; any other machine is numbered by its index.
    const std::string key = name.rfind(kNodePrefix, 0) == 0
                                ? name
                                : fmt::format("{}{}", kNodePrefix, i + kHelixNodeOffset);
    out += key + "=[";
    const LayerRange& r = placement.ranges.at(i);
    for (int l = r.start; l < r.end(); ++l) out += fmt::format("{}{}", l == r.start ? "" : ", ", l);
    out += "]\n";
  }
  return out;
}

void write_helix_solution(const fs::path& path, const Placement& placement,
                          const ServingCluster& cluster) {
  write_text_atomically(helix_solution_text(placement, cluster), path);
}

}  // namespace hetplan::serve
