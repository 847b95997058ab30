#include "serve/helix_import.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <optional>
#include <set>

#include <fmt/format.h>

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

// Helix's bytes/s in GBps; its -1 ("unlimited") becomes our 0 (unlimited).
double GBps_or_unlimited(double Bps) { return Bps < 0 ? 0 : Bps / 1e9; }

Machine machine_of_type(std::string name, const std::string& type, double vram_bytes,
                        double nic_in_GBps, double nic_out_GBps) {
  Machine m;
  m.name = std::move(name);
  m.machine_type = type;
  std::tie(m.gpu_type, m.gpus) = split_machine_type(type);
  m.vram_bytes = vram_bytes;
  m.nic_in_GBps = nic_in_GBps;
  m.nic_out_GBps = nic_out_GBps;
  return m;
}

Link read_link(const IniSectionReader& r) {
  Link link;
  link.bandwidth_GBps = r.quantity("bandwidth", HelixQuantity::kBandwidth) / 1e9;
  link.latency_s = r.quantity("latency", HelixQuantity::kSeconds);
  if (!(link.bandwidth_GBps > 0)) r.fail("bandwidth", "expected a bandwidth > 0");
  if (link.latency_s < 0) r.fail("latency", "expected a latency >= 0");
  return link;
}

std::string known_types(const std::map<std::string, HelixMachineProfile>& profiles) {
  std::string out;
  for (const auto& [name, p] : profiles) {
    if (name == "SourceNode" || name == "SinkNode") continue;
    out += (out.empty() ? "" : ", ") + name;
  }
  return out;
}

// Every neighbour a node's connected_nodes lists needs its [Link-a-b] section (Helix would fail
// to load the file otherwise): a missing one would silently become a missing link.
void check_connected_nodes(const IniFile& ini, const ServingCluster& cluster) {
  auto check = [&](const std::string& section, int node) {
    if (!ini.has_section(section)) return;
    IniSectionReader r(ini, section);
    if (!r.has("connected_nodes")) return;
    std::set<std::string> listed;
    for (const auto& item : r.list("connected_nodes")) {
      // Harmless to the links (they come from [Link-a-b]), but likely a typo for another node.
      if (!listed.insert(item).second)
        r.fail("connected_nodes",
               fmt::format("lists {} twice: expected each neighbour once", item));
      const auto index = parse_index(item);
      const int other = item == "source" ? kSource
                        : item == "sink" ? kSink
                        : index          ? *index
                                         : cluster.size();
      const bool client = other == kSource || other == kSink;
      if (other == node)  // named apart: "expected 0..23, found 0" read as a contradiction
        r.fail(
            "connected_nodes",
            fmt::format("lists {}, the node itself: expected the other nodes it links to", item));
      if ((node < 0 && client) || (!client && other >= cluster.size()))
        r.fail("connected_nodes",
               fmt::format("expected node numbers 0..{} (or 'source', 'sink' for a compute "
                           "node), found {}",
                           cluster.size() - 1, item));
      const int from = other == kSource || node == kSink ? other : node;
      const int to = other == kSource || node == kSink ? node : other;
      auto end_name = [](int e) {
        return e == kSource ? std::string("source")
               : e == kSink ? std::string("sink")
                            : std::to_string(e);
      };
      if (!cluster.link(from, to))
        r.fail("connected_nodes",
               fmt::format(
                   "lists {}, but the file has no [Link-{}-{}] section{}", item, end_name(from),
                   end_name(to),
                   client ? "" : fmt::format(" (nor [Link-{}-{}])", end_name(to), end_name(from))));
    }
  };
  check("SourceNode", kSource);
  check("SinkNode", kSink);
  for (int i = 0; i < cluster.size(); ++i) check(fmt::format("ComputeNode-{}", i), i);
}

ServingCluster read_topology(const IniFile& ini, const fs::path& profiles_path) {
  const auto profiles = read_helix_machine_profiles(profiles_path);
  IniSectionReader names(ini, "NodeNames");
  names.only({"total_compute_nodes"});
  const int64_t n = names.integer("total_compute_nodes");
  if (n <= 0) names.fail("total_compute_nodes", "expected a number of machines > 0");
  if (n > kMaxServingMachines) names.fail("total_compute_nodes", too_many_machines(n));

  std::vector<Machine> machines;
  for (int i = 0; i < n; ++i) {
    const std::string section = fmt::format("ComputeNode-{}", i);
    if (!ini.has_section(section))
      throw InputError(ini.origin(), "[" + section + "]",
                       fmt::format("missing section: [NodeNames] total_compute_nodes = {} needs "
                                   "[ComputeNode-0] .. [ComputeNode-{}]",
                                   n, n - 1));
    IniSectionReader r(ini, section);
    r.only({"type", "connected_nodes"});
    const std::string type = r.word("type");
    auto it = profiles.find(type);
    if (it == profiles.end() || type == "SourceNode" || type == "SinkNode")
      r.fail("type", fmt::format("unknown machine type '{}' ({} defines: {})", type,
                                 profiles_path.string(), known_types(profiles)));
    machines.push_back(machine_of_type(section, type, it->second.vram_bytes, it->second.nic_in_GBps,
                                       it->second.nic_out_GBps));
  }
  ServingCluster cluster(ini.origin(), std::move(machines));
  if (auto it = profiles.find("SourceNode"); it != profiles.end())
    cluster.source_nic_GBps = it->second.nic_out_GBps;
  if (auto it = profiles.find("SinkNode"); it != profiles.end())
    cluster.sink_nic_GBps = it->second.nic_in_GBps;

  for (const auto& section : ini.sections()) {
    const std::string& name = section.name;
    if (name == "SourceNode" || name == "SinkNode") {
      IniSectionReader(ini, section).only({"connected_nodes"});
      continue;
    }
    if (name == "NodeNames") continue;
    if (name.rfind("ComputeNode-", 0) == 0) {
      const auto idx = parse_index(name.substr(12));
      if (!idx || *idx >= n)
        throw InputError(ini.origin(), fmt::format("[{}] (line {})", name, section.line),
                         fmt::format("expected ComputeNode-0 .. ComputeNode-{}", n - 1));
      continue;
    }
    if (name.rfind("Link-", 0) != 0)
      throw InputError(ini.origin(), fmt::format("[{}] (line {})", name, section.line),
                       "unexpected section (expected [NodeNames], [SourceNode], [SinkNode], "
                       "[ComputeNode-i] or [Link-a-b])");
    const std::string rest = name.substr(5);
    const size_t dash = rest.find('-');
    const std::string a = rest.substr(0, dash),
                      b = dash == std::string::npos ? "" : rest.substr(dash + 1);
    const auto ia = a == "source" ? std::optional<int>(kSource) : parse_index(a);
    const auto ib = b == "sink" ? std::optional<int>(kSink) : parse_index(b);
    if (!ia || !ib || (*ia >= n) || (*ib >= n) || *ia == *ib)
      throw InputError(ini.origin(), fmt::format("[{}] (line {})", name, section.line),
                       fmt::format("expected a link name Link-a-b with a, b in 0..{} (or "
                                   "Link-source-i, Link-i-sink)",
                                   n - 1));
    IniSectionReader r(ini, section);
    r.only({"bandwidth", "latency"});
    const Link link = read_link(r);
    cluster.set_link(*ia, *ib, link);
    // Helix's links between machines carry traffic both ways, each at the full bandwidth.
    if (*ia >= 0 && *ib >= 0) cluster.set_link(*ib, *ia, link);
  }
  check_connected_nodes(ini, cluster);
  return cluster;
}

ServingCluster read_simulator_cluster(const IniFile& ini) {
  IniSectionReader coordinator(ini, "Coordinator");
  coordinator.only({"inbound_nic_speed", "outbound_nic_speed"});
  IniSectionReader types_section(ini, "MachineTypes");
  types_section.only({"types"});
  const auto types = types_section.list("types");
  IniSectionReader names_section(ini, "ComputeNodes");
  names_section.only({"names"});
  const auto names = names_section.list("names");
  if (names.empty()) names_section.fail("names", "expected at least one compute node");
  if (names.size() > static_cast<size_t>(kMaxServingMachines))
    names_section.fail("names", too_many_machines(static_cast<int64_t>(names.size())));

  std::vector<Machine> machines;
  for (size_t i = 0; i < names.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (names[i] == names[j])
        names_section.fail("names", fmt::format("lists '{}' twice (items {} and {}): a machine "
                                                "name must be unique",
                                                names[i], j + 1, i + 1));
  for (const auto& name : names) {
    if (!ini.has_section(name))
      throw InputError(ini.origin(), "[" + name + "]",
                       "missing section for a node listed in [ComputeNodes] names");
    IniSectionReader r(ini, name);
    r.only({"vram_size", "inbound_nic_speed", "outbound_nic_speed", "disk_speed", "machine_type",
            "kv_cache_capacity", "activation_backup_capacity"});
    const std::string type = r.word("machine_type");
    if (std::find(types.begin(), types.end(), type) == types.end())
      r.fail("machine_type",
             fmt::format("unknown machine type '{}' (not in [MachineTypes] types)", type));
    const double vram = r.quantity("vram_size", HelixQuantity::kBytes);
    if (!(vram > 0)) r.fail("vram_size", "expected a VRAM size > 0");
    machines.push_back(machine_of_type(
        name, type, vram,
        GBps_or_unlimited(r.quantity("inbound_nic_speed", HelixQuantity::kBandwidth)),
        GBps_or_unlimited(r.quantity("outbound_nic_speed", HelixQuantity::kBandwidth))));
  }
  ServingCluster cluster(ini.origin(), std::move(machines));
  cluster.source_nic_GBps =
      GBps_or_unlimited(coordinator.quantity("outbound_nic_speed", HelixQuantity::kBandwidth));
  cluster.sink_nic_GBps =
      GBps_or_unlimited(coordinator.quantity("inbound_nic_speed", HelixQuantity::kBandwidth));

  IniSectionReader links_section(ini, "Links");
  links_section.only({"names"});
  for (const auto& link_name : links_section.list("names")) {
    if (!ini.has_section(link_name))
      throw InputError(ini.origin(), "[" + link_name + "]",
                       "missing section for a link listed in [Links] names");
    IniSectionReader r(ini, link_name);
    r.only({"in", "out", "latency", "bandwidth"});
    auto endpoint = [&](const std::string& key, const char* client) {
      const std::string node = r.word(key);
      if (node == client) return node == "source" ? kSource : kSink;
      const int idx = cluster.find(node);
      if (idx < 0)
        r.fail(key, fmt::format("unknown node '{}' (expected '{}' or a name in [ComputeNodes])",
                                node, client));
      return idx;
    };
    const int from = endpoint("in", "source");
    const int to = endpoint("out", "sink");
    cluster.set_link(from, to, read_link(r));
  }
  return cluster;
}

}  // namespace

std::pair<std::string, int> split_machine_type(const std::string& machine_type) {
  const size_t x = machine_type.rfind('x');
  if (x != std::string::npos && x > 0 && x + 1 < machine_type.size()) {
    if (auto count = parse_index(machine_type.substr(x + 1)); count && *count > 0)
      return {machine_type.substr(0, x), *count};
  }
  return {machine_type, 1};
}

fs::path find_machine_profiles(const fs::path& cluster_path) {
  fs::path dir = cluster_path.parent_path();
  for (int up = 0; up < 4; ++up) {
    for (const fs::path& candidate :
         {dir / "machine_profiles.ini", dir / "clusters" / "machine_profiles.ini"})
      if (fs::exists(candidate)) return candidate;
    if (!dir.has_parent_path() || dir.parent_path() == dir) break;
    dir = dir.parent_path();
  }
  throw InputError(cluster_path.string(), "",
                   "this Helix cluster topology needs its machine_profiles.ini (machine types with "
                   "VRAM and NIC speeds); none was found next to it or in the folders above");
}

std::map<std::string, HelixMachineProfile> read_helix_machine_profiles(const fs::path& path) {
  const IniFile ini = IniFile::load(path);
  std::map<std::string, HelixMachineProfile> out;
  for (const auto& section : ini.sections()) {
    IniSectionReader r(ini, section);
    r.only({"inbound_nic_speed", "outbound_nic_speed", "disk_speed", "vram_size"});
    HelixMachineProfile p;
    p.nic_in_GBps = GBps_or_unlimited(r.quantity("inbound_nic_speed", HelixQuantity::kBandwidth));
    p.nic_out_GBps = GBps_or_unlimited(r.quantity("outbound_nic_speed", HelixQuantity::kBandwidth));
    p.vram_bytes = r.quantity("vram_size", HelixQuantity::kBytes);
    const bool client = section.name == "SourceNode" || section.name == "SinkNode";
    if (!client && !(p.vram_bytes > 0)) r.fail("vram_size", "expected a VRAM size > 0");
    out[section.name] = p;
  }
  if (out.empty()) throw InputError(path.string(), "", "no machine types ([T4], [A100], ...)");
  return out;
}

ServingCluster read_helix_cluster(const fs::path& path, const fs::path& machine_profiles) {
  const IniFile ini = IniFile::load(path);
  if (ini.has_section("NodeNames"))
    return read_topology(ini,
                         machine_profiles.empty() ? find_machine_profiles(path) : machine_profiles);
  if (ini.has_section("ComputeNodes")) {
    if (!machine_profiles.empty())
      throw InputError(path.string(), "",
                       "a simulator_cluster.ini gives VRAM and NICs per node itself: "
                       "--machine-profiles applies only to Helix cluster topologies "
                       "(cluster*.ini, pruned_cluster.ini)");
    return read_simulator_cluster(ini);
  }
  if (ini.has_section("Solution"))
    throw InputError(path.string(), "",
                     "this is a Helix placement (*_sol.ini); pass it with --placement and give "
                     "the cluster it was made for with --cluster");
  throw InputError(path.string(), "",
                   "not a Helix cluster file: expected a [NodeNames] section (cluster*.ini, "
                   "pruned_cluster.ini) or [ComputeNodes] (simulator_cluster.ini)");
}

}  // namespace hetplan::serve
