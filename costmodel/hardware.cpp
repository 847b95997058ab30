#include "costmodel/hardware.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "costmodel/errors.h"
#include "costmodel/preset_table.h"

namespace hetplan {

double GpuSpec::peak_flops(Dtype dtype) const {
  auto it = peak_tflops.find(dtype);
  return it == peak_tflops.end() ? 0 : it->second * 1e12;
}

std::string_view to_string(Fabric f) {
  switch (f) {
    case Fabric::kPcie:
      return "pcie";
    case Fabric::kNvlink:
      return "nvlink";
    case Fabric::kNvswitch:
      return "nvswitch";
  }
  return "?";
}

namespace {

Document preset_document(const EmbeddedPreset& p) {
  return parse_document(p.text, std::string(p.path), DocumentFormat::kYaml);
}

void read_citations(ObjectReader& r, std::map<std::string, std::string>& out) {
  if (auto c = r.optional_object("citations"))
    for (const auto& key : c->keys()) out[key] = c->string(key);
}

}  // namespace

GpuSpec parse_gpu(ObjectReader r, const std::string& name) {
  GpuSpec g;
  g.name = name;
  g.description = r.string_or("description", "");
  auto peaks = r.object("peak_tflops");
  for (const auto& key : peaks.keys()) {
    Dtype d;
    if (!parse_dtype(key, d))
      peaks.fail(key, "expected a dtype key (fp32, tf32, fp16, bf16, fp8, fp4)");
    g.peak_tflops[d] = peaks.positive(key);
  }
  if (g.peak_tflops.empty()) r.fail("peak_tflops", "expected at least one dtype's peak");
  g.memory_bytes = r.positive("memory_gib") * (1ull << 30);
  g.memory_GBps = r.positive("memory_GBps");
  g.sm_count = r.positive_integer("sm_count");
  g.l2_bytes = r.positive("l2_mib") * (1 << 20);
  g.vendor = r.choice_or("vendor", {"nvidia", "amd"}, "nvidia");
  g.compute_capability = r.number_in_or("compute_capability", 1.0, 20.0, 0);
  g.host_cost_factor = r.number_in_or("host_cost_factor", 0.1, 10, 1);
  read_citations(r, g.citations);
  r.finish();
  return g;
}

GpuSpec load_gpu(const std::string& name_or_path) {
  if (const EmbeddedPreset* p = find_preset("gpus", name_or_path)) {
    Document doc = preset_document(*p);
    return parse_gpu(ObjectReader(doc), name_or_path);
  }
  if (looks_like_file_path(name_or_path)) {
    Document doc = load_document(name_or_path);
    return parse_gpu(ObjectReader(doc), std::filesystem::path(name_or_path).stem().string());
  }
  throw InputError(fmt::format("unknown GPU type \"{}\": expected one of {} or a GPU file",
                               name_or_path, hardware_preset_names("gpus")));
}

NodeSpec parse_node(ObjectReader r, const std::string& name,
                    const std::map<std::string, GpuSpec>& extra_gpus) {
  NodeSpec n;
  n.name = name;
  n.description = r.string_or("description", "");
  const std::string gpu = r.string("gpu");
  if (auto it = extra_gpus.find(gpu); it != extra_gpus.end()) {
    n.gpu = it->second;
  } else if (find_preset("gpus", gpu)) {
    n.gpu = load_gpu(gpu);
  } else {
    r.fail("gpu",
           fmt::format("expected a GPU type ({}{}), found \"{}\"", hardware_preset_names("gpus"),
                       extra_gpus.empty() ? "" : ", or one of the file's gpu_types", gpu));
  }
  n.gpus = r.positive_integer("gpus");
  if (n.gpus > kMaxGpusPerNode)
    r.fail("gpus",
           fmt::format("expected at most {} GPUs in one node, found {}", kMaxGpusPerNode, n.gpus));
  const std::string fabric = r.choice("fabric", {"pcie", "nvlink", "nvswitch"});
  n.fabric = fabric == "pcie"     ? Fabric::kPcie
             : fabric == "nvlink" ? Fabric::kNvlink
                                  : Fabric::kNvswitch;
  n.intra_GBps = r.positive("intra_GBps");
  n.intra_latency_s = r.positive("intra_latency_us") * 1e-6;
  n.network_gbit = r.positive("network_gbit");
  n.network_latency_s = r.positive("network_latency_us") * 1e-6;
  n.host_link_GBps = r.positive_or("host_link_GBps", 16);
  n.price_per_hour = r.non_negative_or("price_per_hour", 0);
  read_citations(r, n.citations);
  r.finish();
  return n;
}

NodeSpec load_node(const std::string& name_or_path) {
  if (const EmbeddedPreset* p = find_preset("nodes", name_or_path)) {
    Document doc = preset_document(*p);
    return parse_node(ObjectReader(doc), name_or_path);
  }
  if (looks_like_file_path(name_or_path)) {
    Document doc = load_document(name_or_path);
    return parse_node(ObjectReader(doc), std::filesystem::path(name_or_path).stem().string());
  }
  throw InputError(fmt::format("unknown node type \"{}\": expected one of {} or a node file",
                               name_or_path, hardware_preset_names("nodes")));
}

int64_t ClusterSpec::num_gpus() const {
  int64_t n = 0;
  for (const auto& g : groups) n += g.count * g.node.gpus;
  return n;
}

int64_t ClusterSpec::num_nodes() const {
  int64_t n = 0;
  for (const auto& g : groups) n += g.count;
  return n;
}

namespace {

const NetworkLink* find_link(const ClusterSpec& c, const std::string& a, const std::string& b) {
  for (const auto& l : c.links)
    if ((l.a == a && l.b == b) || (l.a == b && l.b == a)) return &l;
  return nullptr;
}

const NodeSpec& node_of(const ClusterSpec& c, const std::string& name) {
  for (const auto& g : c.groups)
    if (g.node.name == name) return g.node;
  throw InputError(c.origin, "nodes", fmt::format("no node type \"{}\" in the cluster", name));
}

}  // namespace

double ClusterSpec::network_GBps(const std::string& a, const std::string& b) const {
  if (const NetworkLink* l = find_link(*this, a, b)) return l->gbit / 8;
  return std::min(node_of(*this, a).network_gbit, node_of(*this, b).network_gbit) / 8;
}

double ClusterSpec::network_latency_s(const std::string& a, const std::string& b) const {
  if (const NetworkLink* l = find_link(*this, a, b)) return l->latency_s;
  return std::max(node_of(*this, a).network_latency_s, node_of(*this, b).network_latency_s);
}

const ZoneLink* ClusterSpec::zone_link(size_t a, size_t b) const {
  const std::string& za = groups.at(a).zone;
  const std::string& zb = groups.at(b).zone;
  if (!cloud || za == zb) return nullptr;
  return zone_region.at(za) == zone_region.at(zb) ? &cloud->between_zones : &cloud->between_regions;
}

double ClusterSpec::group_network_GBps(size_t a, size_t b) const {
  const double GBps = network_GBps(groups.at(a).node.name, groups.at(b).node.name);
  const ZoneLink* z = zone_link(a, b);
  return z ? GBps * z->network_fraction : GBps;
}

double ClusterSpec::group_network_latency_s(size_t a, size_t b) const {
  const double s = network_latency_s(groups.at(a).node.name, groups.at(b).node.name);
  const ZoneLink* z = zone_link(a, b);
  return z ? std::max(s, z->latency_s) : s;
}

void validate_cluster(const ClusterSpec& c) {
  // Bounded before num_gpus() multiplies them (2^20 x 1024 GPUs fit an int64_t).
  int64_t gpus = 0;
  for (size_t i = 0; i < c.groups.size(); ++i) {
    const NodeGroup& g = c.groups[i];
    if (g.count > kMaxClusterGpus || (gpus += g.count * g.node.gpus) > kMaxClusterGpus)
      throw InputError(
          c.origin, fmt::format("nodes[{}].count", i),
          g.count > kMaxClusterGpus
              ? fmt::format("expected at most {} GPUs in the cluster; {} nodes alone exceed that",
                            kMaxClusterGpus, g.count)
              : fmt::format("expected at most {} GPUs in the cluster; {} nodes of {} GPUs bring "
                            "it to {}",
                            kMaxClusterGpus, g.count, g.node.gpus, gpus));
  }
  if (c.groups.empty() || c.num_gpus() <= 0)
    throw InputError(c.origin, "nodes",
                     "expected at least one node with GPUs (a cluster with no "
                     "GPUs cannot run anything)");
  for (size_t i = 0; i < c.groups.size(); ++i)
    for (size_t j = i + 1; j < c.groups.size(); ++j)
      if (c.groups[i].node.name == c.groups[j].node.name && c.groups[i].zone == c.groups[j].zone)
        throw InputError(
            c.origin, fmt::format("nodes[{}]", j),
            fmt::format("node type \"{}\" listed twice{}; give one count", c.groups[j].node.name,
                        c.groups[j].zone.empty() ? "" : " in zone " + c.groups[j].zone));
}

namespace {

// network.cloud (a network preset or file) and network.zones (zone: region).
void read_zones(ObjectReader& net, ClusterSpec& c) {
  if (auto cloud = net.optional_string("cloud")) c.cloud = load_network(*cloud);
  if (auto zones = net.optional_object("zones")) {
    for (const auto& zone : zones->keys()) c.zone_region[zone] = zones->string(zone);
    if (!c.cloud) net.fail("zones", "expected network.cloud too (a network preset or file)");
  }
}

// Every node group names a zone of network.zones, or none does.
void check_zones(ObjectReader& r, const ClusterSpec& c) {
  size_t named = 0;
  for (size_t i = 0; i < c.groups.size(); ++i) {
    const std::string& zone = c.groups[i].zone;
    if (zone.empty()) continue;
    ++named;
    if (!c.zone_region.count(zone))
      throw InputError(c.origin, fmt::format("nodes[{}].zone", i),
                       fmt::format("expected a zone of network.zones, found \"{}\"", zone));
  }
  if (named != 0 && named != c.groups.size())
    r.fail("nodes", "expected a zone on every node entry or on none");
}

}  // namespace

ClusterSpec parse_cluster(const Document& doc) {
  ObjectReader r(doc);
  ClusterSpec c;
  c.origin = doc.origin;
  c.name = r.string_or("name", std::filesystem::path(doc.origin).stem().string());
  r.string_or("description", "");
  std::map<std::string, GpuSpec> gpus;
  if (auto g = r.optional_object("gpu_types"))
    for (const auto& key : g->keys()) {
      // A preset's name would mean two GPUs: the preset nodes' and this one, and calibrations
      // keyed by the name would apply to both.
      if (find_preset("gpus", key))
        g->fail(key,
                fmt::format("redefines the preset GPU {}: give this GPU a name of its own", key));
      gpus[key] = parse_gpu(g->object(key), key);
    }
  std::map<std::string, NodeSpec> nodes;
  if (auto n = r.optional_object("node_types"))
    for (const auto& key : n->keys()) nodes[key] = parse_node(n->object(key), key, gpus);
  for (auto& item : r.objects("nodes")) {
    const std::string type = item.string("type");
    NodeGroup g;
    if (auto it = nodes.find(type); it != nodes.end()) {
      g.node = it->second;
    } else if (find_preset("nodes", type)) {
      g.node = load_node(type);
    } else {
      item.fail(
          "type",
          fmt::format("expected a node type ({}{}), found \"{}\"", hardware_preset_names("nodes"),
                      nodes.empty() ? "" : ", or one of the file's node_types", type));
    }
    g.count = item.positive_integer("count");
    g.zone = item.string_or("zone", "");
    item.finish();
    c.groups.push_back(std::move(g));
  }
  if (auto net = r.optional_object("network")) {
    read_zones(*net, c);
    for (auto& l : net->objects_or_empty("links")) {
      auto between = l.strings("between");
      if (between.size() != 2) l.fail("between", "expected two node types");
      NetworkLink link{between[0], between[1], l.positive("gbit"), l.positive("latency_us") * 1e-6};
      for (const auto& name : between) {
        bool known = false;
        for (const auto& g : c.groups) known |= g.node.name == name;
        if (!known)
          l.fail("between", fmt::format("\"{}\" is not a node type of this cluster", name));
      }
      l.finish();
      c.links.push_back(link);
    }
    net->finish();
  }
  check_zones(r, c);
  if (r.has("calibration")) {
    const auto base = std::filesystem::path(doc.origin).parent_path();
    for (const auto& p : r.strings("calibration")) {
      std::filesystem::path path(p);
      c.calibration.push_back((path.is_absolute() ? path : base / path).string());
    }
  }
  r.finish();
  validate_cluster(c);
  c.gpu_types = std::move(gpus);
  return c;
}

namespace {

// "p3.8xlarge:3,g4dn.12xlarge:1" (a count of 1 may be left out).
ClusterSpec parse_cluster_list(const std::string& spec) {
  ClusterSpec c;
  c.origin = "--cluster " + spec;
  c.name = spec;
  size_t pos = 0;
  while (pos <= spec.size()) {
    const size_t comma = spec.find(',', pos);
    const std::string item =
        spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    const size_t colon = item.find(':');
    const std::string type = item.substr(0, colon);
    int64_t count = 1;
    if (colon != std::string::npos) {
      const std::string n = item.substr(colon + 1);
      auto [p, ec] = std::from_chars(n.data(), n.data() + n.size(), count);
      if (ec != std::errc() || p != n.data() + n.size() || count <= 0)
        throw InputError(c.origin, item, "expected NODE:COUNT with a whole count > 0");
    }
    if (!find_preset("nodes", type))
      throw InputError(c.origin, item,
                       fmt::format("unknown node type \"{}\": expected one of {}", type,
                                   hardware_preset_names("nodes")));
    c.groups.push_back({load_node(type), count, ""});
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  validate_cluster(c);
  return c;
}

}  // namespace

ClusterSpec load_cluster(const std::string& spec) {
  if (spec.empty()) throw InputError("--cluster: expected a preset, a file or NODE:COUNT,...");
  if (const EmbeddedPreset* p = find_preset("clusters", spec))
    return parse_cluster(preset_document(*p));
  if (looks_like_file_path(spec) || std::filesystem::exists(spec))
    return parse_cluster(load_document(spec));
  return parse_cluster_list(spec);
}

std::optional<GpuSpec> find_gpu_spec(const std::string& name,
                                     const std::map<std::string, GpuSpec>& defined) {
  if (auto it = defined.find(name); it != defined.end()) return it->second;
  if (find_preset("gpus", name)) return load_gpu(name);
  return std::nullopt;
}

bool is_gpu_preset(const std::string& name) { return find_preset("gpus", name) != nullptr; }

std::string hardware_preset_names(std::string_view kind) {
  std::string out;
  for (const auto& p : embedded_presets())
    if (p.kind == kind) out += (out.empty() ? "" : ", ") + std::string(p.name);
  return out;
}

std::vector<HardwarePresetInfo> hardware_presets() {
  std::vector<HardwarePresetInfo> out;
  for (const auto& p : embedded_presets()) {
    if (p.kind != "gpus" && p.kind != "nodes" && p.kind != "clusters" && p.kind != "networks")
      continue;
    Document doc = preset_document(p);
    const std::string kind = p.kind == "gpus"       ? "gpu"
                             : p.kind == "nodes"    ? "node"
                             : p.kind == "networks" ? "network"
                                                    : "cluster";
    std::string description = doc.root.value("description", "");
    out.push_back({kind, std::string(p.name), description});
  }
  return out;
}

}  // namespace hetplan
