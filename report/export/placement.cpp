// Where each framework rank runs and how to launch the ranks so: hetplan's placement (which
// pipeline rank on which GPUs) in the frameworks' rank order. A plan for a mixed cluster is only
// what hetplan predicted when every rank starts on its device; see docs/exports.md, "Placement".
#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "costmodel/topology.h"
#include "report/export/exporters.h"

namespace hetplan::export_detail {
namespace {

std::string span_text(int64_t a, int64_t b) {
  return a == b ? fmt::format("{}", a) : fmt::format("{}-{}", a, b);
}

bool consecutive(const std::vector<int64_t>& v) {
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i] != v[i - 1] + 1) return false;
  return true;
}

// "0-3" for consecutive numbers, else "2,3,0,1".
std::string list_text(const std::vector<int64_t>& v) {
  if (!v.empty() && consecutive(v)) return span_text(v.front(), v.back());
  return fmt::format("{}", fmt::join(v, ","));
}

// "pipeline rank 1" or "pipeline ranks 0-3" for framework ranks a..b.
std::string pipeline_text(const Strategy& s, int64_t a, int64_t b) {
  const int64_t per_rank = s.dp * s.tp;
  const int64_t first = a / per_rank, last = b / per_rank;
  return first == last ? fmt::format("pipeline rank {}", first)
                       : fmt::format("pipeline ranks {}-{}", first, last);
}

std::string header(std::string_view framework, bool nodes) {
  return fmt::format(
      "{} numbers ranks tensor-parallel fastest, then data-parallel, then pipeline rank; "
      "hetplan's plan runs them on these {}:",
      framework, nodes ? "nodes (numbered in cluster order)" : "devices");
}

// A node's GPUs as used: "GPUs 0-3", and, where the node's ranks do not run on GPUs 0, 1, ... in
// order, how the launcher is told which.
std::string gpus_text(const std::vector<int64_t>& gpus, Launcher launcher) {
  if (gpus.front() == 0 && consecutive(gpus)) return fmt::format("GPUs {}", list_text(gpus));
  return fmt::format("GPUs {} ({}{})", list_text(gpus),
                     launcher == Launcher::kTorchrun ? "CUDA_VISIBLE_DEVICES=" : "--include HOST:",
                     fmt::join(gpus, ","));
}

void launch_lines(const RankPlacement& p, Launcher launcher, std::vector<std::string>& lines) {
  size_t per_node = p.nodes.front().gpus.size();
  bool uniform = true;
  for (const auto& n : p.nodes) uniform &= n.gpus.size() == per_node;
  std::string order;
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    const auto& n = p.nodes[i];
    if (launcher == Launcher::kTorchrun)
      order += fmt::format("{}node {} as --node-rank {}{}", i == 0 ? "" : ", ", n.node, i,
                           uniform ? "" : fmt::format(" --nproc-per-node {}", n.gpus.size()));
    else
      order += fmt::format("{}node {}", i == 0 ? "" : ", ", n.node);
  }
  if (launcher == Launcher::kTorchrun) {
    lines.push_back(fmt::format(
        "start {}{} (torchrun's default static rendezvous: --nnodes {} and the same "
        "--master-addr and --master-port on every node; with --rdzv-backend c10d torchrun ignores "
        "--node-rank)",
        order, uniform ? fmt::format(", each with --nproc-per-node {}", per_node) : "",
        p.nodes.size()));
    return;
  }
  lines.push_back(fmt::format(
      "list the nodes in the DeepSpeed hostfile in this order: {} (its launcher numbers ranks in "
      "hostfile order, a node's GPUs in ascending order)",
      order));
  for (const auto& n : p.nodes) {
    if (std::is_sorted(n.gpus.begin(), n.gpus.end())) continue;
    lines.push_back(fmt::format(
        "node {} runs ranks {} on GPUs {}, not in ascending order, which the DeepSpeed launcher "
        "cannot start: launch with torchrun and CUDA_VISIBLE_DEVICES={} on that node",
        n.node, span_text(n.first_rank, n.first_rank + static_cast<int64_t>(n.gpus.size()) - 1),
        list_text(n.gpus), fmt::join(n.gpus, ",")));
  }
}

}  // namespace

RankPlacement rank_placement(const Strategy& s, const ClusterSpec* cluster) {
  RankPlacement p;
  const int64_t per_rank = s.dp * s.tp;
  if (static_cast<int64_t>(s.stages.size()) < s.pp) return p;
  // Virtual stage d < pp runs on pipeline rank d, interleaved and V alike.
  for (int64_t d = 0; d < s.pp; ++d) {
    const StageSpec& st = s.stages[d];
    if (static_cast<int64_t>(st.devices.size()) != per_rank) return RankPlacement{};
    for (int64_t dev : st.devices) p.ranks.push_back({dev, -1, -1, "", st.gpu_type});
  }
  p.default_order = true;
  for (size_t r = 0; r < p.ranks.size(); ++r)
    p.default_order &= p.ranks[r].device == static_cast<int64_t>(r);
  if (!cluster) return p;
  const std::vector<Device> all = cluster_devices(*cluster);
  for (const auto& r : p.ranks)
    if (r.device < 0 || r.device >= static_cast<int64_t>(all.size())) return p;  // another cluster
  for (const auto& g : cluster->groups)
    p.homogeneous &= g.node.name == cluster->groups[0].node.name;
  p.cluster_nodes = cluster->num_nodes();
  std::map<int64_t, std::vector<int64_t>> ranks_of_node;
  for (size_t i = 0; i < p.ranks.size(); ++i) {
    auto& r = p.ranks[i];
    const Device& d = all[r.device];
    const NodeSpec& node = cluster->groups[d.group].node;
    r.node = d.node;
    r.gpu = d.local;
    r.kind = node.name;
    r.gpu_type = node.gpu.name;
    ranks_of_node[d.node].push_back(static_cast<int64_t>(i));
  }
  for (const auto& [node, ranks] : ranks_of_node) {
    if (!consecutive(ranks)) {  // ranks ascend; a gap means another node's ranks come between
      p.nodes.clear();
      return p;
    }
    RankPlacement::Node n;
    n.node = node;
    n.kind = p.ranks[ranks.front()].kind;
    n.gpu_type = p.ranks[ranks.front()].gpu_type;
    n.first_rank = ranks.front();
    for (int64_t r : ranks) n.gpus.push_back(p.ranks[r].gpu);
    p.nodes.push_back(std::move(n));
  }
  std::sort(p.nodes.begin(), p.nodes.end(),
            [](const auto& a, const auto& b) { return a.first_rank < b.first_rank; });
  return p;
}

std::vector<int64_t> node_ranks(const RankPlacement& p) {
  if (p.nodes.empty()) return {};
  std::vector<int64_t> out(p.cluster_nodes, -1);
  for (size_t i = 0; i < p.nodes.size(); ++i) out[p.nodes[i].node] = static_cast<int64_t>(i);
  return out;
}

std::vector<int64_t> rank_devices(const RankPlacement& p) {
  std::vector<int64_t> out;
  for (const auto& r : p.ranks) out.push_back(r.device);
  return out;
}

std::vector<std::string> placement_lines(const Strategy& s, const RankPlacement& p,
                                         std::string_view framework, Launcher launcher) {
  std::vector<std::string> lines;
  if (p.ranks.empty()) return lines;
  const auto n_ranks = static_cast<int64_t>(p.ranks.size());
  bool uniform = !p.nodes.empty();
  for (const auto& n : p.nodes) uniform &= n.gpus.size() == p.nodes.front().gpus.size();
  if (p.default_order && p.nodes.empty() && p.ranks.front().node < 0) {
    lines.push_back(
        "rank r runs on hetplan device r (cluster order): the launcher's default order, with the "
        "nodes started in cluster order");
    return lines;
  }
  if (p.default_order && p.homogeneous && uniform) {
    lines.push_back(fmt::format(
        "rank r runs on hetplan device r ({} ranks per node, nodes in cluster order): the "
        "launcher's default order, with {}",
        p.nodes.front().gpus.size(),
        launcher == Launcher::kTorchrun ? "node i started as torchrun --node-rank i"
                                        : "the nodes in the hostfile in cluster order"));
    return lines;
  }
  lines.push_back(header(framework, p.ranks.front().node >= 0));
  if (!p.nodes.empty()) {
    for (const auto& n : p.nodes) {
      const int64_t last = n.first_rank + static_cast<int64_t>(n.gpus.size()) - 1;
      lines.push_back(fmt::format("  node {} ({}, {}): ranks {} ({}) on {}", n.node, n.kind,
                                  n.gpu_type, span_text(n.first_rank, last),
                                  pipeline_text(s, n.first_rank, last),
                                  gpus_text(n.gpus, launcher)));
    }
    if (static_cast<int64_t>(p.nodes.size()) < p.cluster_nodes)
      lines.push_back(fmt::format("  the cluster's other {} nodes are not used",
                                  p.cluster_nodes - static_cast<int64_t>(p.nodes.size())));
    launch_lines(p, launcher, lines);
    return lines;
  }
  // Runs of consecutive ranks on one node (or, without a cluster, consecutive devices of one
  // pipeline rank).
  const int64_t per_rank = s.dp * s.tp;
  for (int64_t a = 0; a < n_ranks;) {
    int64_t b = a;
    while (b + 1 < n_ranks && (b + 1) % per_rank != 0 && p.ranks[b + 1].node == p.ranks[a].node &&
           p.ranks[b + 1].device == p.ranks[b].device + 1)
      ++b;
    const auto& r = p.ranks[a];
    if (r.node >= 0)
      lines.push_back(fmt::format("  ranks {} ({}): node {} ({}, {}) GPUs {}", span_text(a, b),
                                  pipeline_text(s, a, b), r.node, r.kind, r.gpu_type,
                                  span_text(r.gpu, r.gpu + b - a)));
    else
      lines.push_back(fmt::format(
          "  ranks {} ({}{}): hetplan devices {}", span_text(a, b), pipeline_text(s, a, b),
          r.gpu_type.empty() ? "" : ", " + r.gpu_type, span_text(r.device, p.ranks[b].device)));
    a = b + 1;
  }
  if (p.ranks.front().node >= 0)
    lines.push_back(
        "a node's ranks are not one contiguous block, so no node order gives this placement: "
        "start each rank yourself on its node and GPU (RANK, LOCAL_RANK, WORLD_SIZE, "
        "MASTER_ADDR, MASTER_PORT and CUDA_VISIBLE_DEVICES set per process)");
  else
    lines.push_back(
        "hetplan numbers devices in cluster order (node groups as listed, nodes, GPUs); start the "
        "nodes so that every rank runs on its device");
  return lines;
}

}  // namespace hetplan::export_detail
