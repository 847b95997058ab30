#include "search/placement.h"

#include <algorithm>
#include <numeric>

namespace hetplan {

std::vector<std::vector<int64_t>> node_group_orders(const ClusterSpec& cluster) {
  std::vector<int64_t> all(cluster.groups.size());
  std::iota(all.begin(), all.end(), 0);
  return node_group_orders(cluster, std::move(all));
}

std::vector<std::vector<int64_t>> node_group_orders(const ClusterSpec& cluster,
                                                    std::vector<int64_t> order) {
  const int64_t n = static_cast<int64_t>(order.size());
  std::sort(order.begin(), order.end());
  std::vector<std::vector<int64_t>> out;
  if (n <= 4) {
    do out.push_back(order);
    while (std::next_permutation(order.begin(), order.end()));
    return out;
  }
  auto speed = [&](int64_t g) {
    const GpuSpec& gpu = cluster.groups[g].node.gpu;
    return std::max(gpu.peak_flops(Dtype::kBf16), gpu.peak_flops(Dtype::kFp16));
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return speed(a) > speed(b); });
  out.push_back(order);
  std::reverse(order.begin(), order.end());
  out.push_back(order);
  return out;
}

std::optional<std::vector<StageSpec>> place_stages(const ClusterSpec& cluster,
                                                   const std::vector<int64_t>& order, int64_t dp,
                                                   int64_t tp, int64_t pp) {
  const int64_t per_stage = dp * tp;
  std::vector<int64_t> first(cluster.groups.size(), 0);
  for (size_t g = 1; g < cluster.groups.size(); ++g)
    first[g] = first[g - 1] + cluster.groups[g - 1].count * cluster.groups[g - 1].node.gpus;
  std::vector<StageSpec> stages;
  for (int64_t g : order) {
    const NodeGroup& group = cluster.groups[g];
    const int64_t gpus = group.count * group.node.gpus;
    if (gpus % per_stage != 0) return std::nullopt;
    for (int64_t s = 0; s < gpus / per_stage; ++s) {
      StageSpec st;
      st.gpu_type = group.node.gpu.name;
      for (int64_t i = 0; i < per_stage; ++i) st.devices.push_back(first[g] + s * per_stage + i);
      stages.push_back(std::move(st));
    }
  }
  if (static_cast<int64_t>(stages.size()) != pp) return std::nullopt;
  return stages;
}

}  // namespace hetplan
