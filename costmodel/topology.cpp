#include "costmodel/topology.h"

#include <algorithm>
#include <limits>
#include <map>

namespace hetplan {

std::vector<Device> cluster_devices(const ClusterSpec& cluster) {
  std::vector<Device> out;
  int64_t node = 0;
  for (size_t g = 0; g < cluster.groups.size(); ++g) {
    const NodeGroup& group = cluster.groups[g];
    for (int64_t n = 0; n < group.count; ++n, ++node)
      for (int64_t l = 0; l < group.node.gpus; ++l)
        out.push_back({static_cast<int64_t>(out.size()), node, static_cast<int64_t>(g), l});
  }
  return out;
}

std::string CommGroup::link() const {
  if (nodes > 1) return "net";
  return std::string(to_string(fabric));
}

CommGroup make_comm_group(const ClusterSpec& cluster, const std::vector<Device>& all,
                          const std::vector<int64_t>& devices, int64_t sharing) {
  CommGroup g;
  g.size = static_cast<int64_t>(devices.size());
  g.sharing = std::max<int64_t>(1, sharing);
  std::map<int64_t, int64_t> per_node;  // node -> ranks
  std::map<int64_t, int64_t> node_group;
  for (int64_t d : devices) {
    per_node[all[d].node]++;
    node_group[all[d].node] = all[d].group;
  }
  g.nodes = static_cast<int64_t>(per_node.size());
  g.per_node = 0;
  for (auto [node, n] : per_node) g.per_node = std::max(g.per_node, n);
  g.intra_GBps = std::numeric_limits<double>::max();
  g.fabric = Fabric::kNvswitch;
  for (auto [node, grp] : node_group) {
    const NodeSpec& spec = cluster.groups[grp].node;
    g.intra_GBps = std::min(g.intra_GBps, spec.intra_GBps);
    g.intra_latency_s = std::max(g.intra_latency_s, spec.intra_latency_s);
    if (static_cast<int>(spec.fabric) < static_cast<int>(g.fabric)) g.fabric = spec.fabric;
  }
  if (g.nodes > 1) {
    g.inter_GBps = std::numeric_limits<double>::max();
    // Distinct node kinds in the group: the slowest pair bounds a ring through all of them.
    std::vector<int64_t> kinds;
    for (auto [node, grp] : node_group) kinds.push_back(grp);
    std::sort(kinds.begin(), kinds.end());
    kinds.erase(std::unique(kinds.begin(), kinds.end()), kinds.end());
    for (int64_t a : kinds)
      for (int64_t b : kinds) {
        g.inter_GBps = std::min(g.inter_GBps, cluster.group_network_GBps(a, b));
        g.inter_latency_s = std::max(g.inter_latency_s, cluster.group_network_latency_s(a, b));
      }
  }
  return g;
}

CommGroup inner_group(const CommGroup& g, int64_t ranks) {
  CommGroup out = g;
  out.size = std::min(ranks, g.size);
  const int64_t per_node = std::max<int64_t>(1, g.per_node);
  out.nodes = std::max<int64_t>(1, (out.size + per_node - 1) / per_node);
  out.per_node = std::min(out.size, per_node);
  return out;
}

Link link_between(const ClusterSpec& cluster, const Device& a, const Device& b) {
  if (a.node == b.node) {
    const NodeSpec& n = cluster.groups[a.group].node;
    return {n.intra_GBps, n.intra_latency_s, true};
  }
  const auto ga = static_cast<size_t>(a.group), gb = static_cast<size_t>(b.group);
  return {cluster.group_network_GBps(ga, gb), cluster.group_network_latency_s(ga, gb), false};
}

}  // namespace hetplan
