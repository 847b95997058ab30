#include "serve/training_cluster.h"

#include <set>

#include <fmt/format.h>

#include "costmodel/errors.h"
#include "costmodel/preset_table.h"
#include "serve/helix_import.h"

namespace hetplan::serve {
namespace {

namespace fs = std::filesystem;

// Top-level keys that only one of hetplan's cluster files has (both may have name and
// description): serve/cluster_file.cpp and parse_cluster() in costmodel/hardware.cpp.
const std::set<std::string> kServingKeys = {"machine_types", "machines", "links",
                                            "client_nic_GBps"};
const std::set<std::string> kTrainingKeys = {"nodes", "node_types", "gpu_types", "network",
                                             "calibration"};

constexpr const char* kBothKinds =
    "a hetplan serving cluster file (machine_types, machines, links; docs/serving.md) or a "
    "training cluster file (nodes, optionally node_types, gpu_types, network; docs/formats.md)";

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

bool is_cluster_preset(const std::string& name) { return find_preset("clusters", name) != nullptr; }

// What --cluster takes, for messages about a value that is none of it.
std::string what_serve_cluster_takes() {
  return fmt::format(
      "expected a cluster preset ({}), NODE:COUNT,... with node presets ({}), a Helix INI file "
      "(cluster*.ini, pruned_cluster.ini, simulator_cluster.ini), or {}",
      hardware_preset_names("clusters"), hardware_preset_names("nodes"), kBothKinds);
}

// load_cluster()'s rule for a spec that names a file by its form, and Helix's INI files.
bool looks_like_file(const std::string& spec) {
  return looks_like_file_path(spec) || spec.ends_with(".ini");
}

Machine machine_of(const NodeSpec& node, std::string name) {
  Machine m;
  m.name = std::move(name);
  m.machine_type = node.name;
  m.gpu_type = node.gpu.name;
  m.gpus = static_cast<int>(node.gpus);
  m.vram_bytes = static_cast<double>(node.gpus) * node.gpu.memory_bytes;
  // network_gbit is the node's whole network (all NICs), in each direction.
  m.nic_in_GBps = node.network_gbit / 8;
  m.nic_out_GBps = m.nic_in_GBps;
  return m;
}

}  // namespace

ServingCluster serving_cluster_from(const ClusterSpec& cluster) {
  // Checked before the machines are made: a list such as p4d.24xlarge:100000000 is one line.
  if (const int64_t nodes = cluster.num_nodes(); nodes > kMaxServingMachines)
    throw InputError(
        cluster.origin, "nodes",
        "the cluster would have " + too_many_machines(nodes) + " (one serving machine per node)");
  std::vector<Machine> machines;
  std::vector<size_t> group_of;  // machine index -> index of its node group
  std::set<std::string> names;
  for (size_t g = 0; g < cluster.groups.size(); ++g) {
    const NodeGroup& group = cluster.groups[g];
    for (int64_t i = 0; i < group.count; ++i) {
      const std::string name =
          group.count == 1 ? group.node.name : fmt::format("{}-{}", group.node.name, i);
      // A node type named "p4d.24xlarge-0" beside two p4d.24xlarge nodes would clash.
      if (!names.insert(name).second)
        throw InputError(cluster.origin, "nodes",
                         fmt::format("two serving machines would be named '{}': rename the "
                                     "node type",
                                     name));
      machines.push_back(machine_of(group.node, name));
      group_of.push_back(g);
    }
  }
  ServingCluster serving(cluster.origin, std::move(machines));
  const int n = serving.size();
  for (int i = 0; i < n; ++i) {
    const NodeSpec& node = cluster.groups[group_of[i]].node;
    // Clients reach a machine over its own network: they send and receive token ids only.
    const Link client{node.network_gbit / 8, node.network_latency_s};
    serving.set_link(kSource, i, client);
    serving.set_link(i, kSink, client);
    for (int j = 0; j < n; ++j) {
      if (j == i) continue;
      const size_t gi = group_of[i], gj = group_of[j];
      serving.set_link(
          i, j, {cluster.group_network_GBps(gi, gj), cluster.group_network_latency_s(gi, gj)});
    }
  }
  return serving;
}

ClusterFileKind cluster_file_kind(const Document& doc) {
  if (!doc.root.is_object())
    throw InputError(doc.origin, "", std::string("expected ") + kBothKinds + ", found no mapping");
  std::vector<std::string> serving, training, all;
  for (const auto& [key, value] : doc.root.items()) {
    all.push_back(key);
    if (kServingKeys.count(key)) serving.push_back(key);
    if (kTrainingKeys.count(key)) training.push_back(key);
  }
  if (!serving.empty() && !training.empty())
    throw InputError(doc.origin, "",
                     fmt::format("has keys of a serving cluster ({}) and of a training cluster "
                                 "({}): expected one kind, {}",
                                 joined(serving), joined(training), kBothKinds));
  if (!serving.empty()) return ClusterFileKind::kServing;
  if (!training.empty()) return ClusterFileKind::kTraining;
  throw InputError(doc.origin, "",
                   fmt::format("expected {}; found the keys: {}", kBothKinds,
                               all.empty() ? "none" : joined(all)));
}

ServeCluster read_serve_cluster_file(const fs::path& path) {
  if (path.extension() == ".ini") return {read_helix_cluster(path), std::nullopt};
  const Document doc = load_document(path);
  if (cluster_file_kind(doc) == ClusterFileKind::kServing)
    return {read_cluster_document(doc), std::nullopt};
  ClusterSpec training = parse_cluster(doc);
  ServingCluster serving = serving_cluster_from(training);
  return {std::move(serving), std::move(training)};
}

ServeCluster load_serve_cluster(const std::string& spec) {
  if (spec.empty()) throw InputError("--cluster: " + what_serve_cluster_takes());
  std::error_code ec;
  // Presets first, as predict and search read them.
  if (!is_cluster_preset(spec) && fs::exists(spec, ec)) {
    if (!fs::is_regular_file(spec, ec))
      throw InputError(spec, "", "is not a file: " + what_serve_cluster_takes());
    return read_serve_cluster_file(spec);
  }
  if (looks_like_file(spec))
    throw InputError(spec, "", "no such file: " + what_serve_cluster_takes());
  // A bare word is a cluster or node preset; load_cluster's message would list node types only.
  if (!is_cluster_preset(spec) && spec.find_first_of(":,") == std::string::npos) {
    if (!find_preset("nodes", spec))
      throw InputError("--cluster " + spec, "",
                       "no such preset or file: " + what_serve_cluster_takes());
  }
  ClusterSpec training = load_cluster(spec);
  ServingCluster serving = serving_cluster_from(training);
  return {std::move(serving), std::move(training)};
}

}  // namespace hetplan::serve
