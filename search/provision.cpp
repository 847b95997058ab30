#include "search/provision.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "costmodel/cost_model.h"
#include "costmodel/errors.h"

namespace hetplan {
namespace {

std::vector<int64_t> counts_up_to(int64_t max) {
  std::vector<int64_t> out = {0};
  for (int64_t c = 1; c <= max; c *= 2) out.push_back(c);
  return out;
}

// Every assignment of counts to the node types with at most `max_types` non-zero counts.
void enumerate(const std::vector<NodeSpec>& nodes, const std::vector<int64_t>& counts,
               int64_t max_types, size_t i, std::vector<int64_t>& current,
               std::vector<std::vector<int64_t>>& out) {
  if (i == nodes.size()) {
    const auto used =
        std::count_if(current.begin(), current.end(), [](int64_t c) { return c > 0; });
    if (used > 0 && used <= max_types) out.push_back(current);
    return;
  }
  for (int64_t c : counts) {
    current[i] = c;
    enumerate(nodes, counts, max_types, i + 1, current, out);
  }
}

// Puts each node type of a mix in a zone of its own (in one region, or each in its own region).
void spread_groups(const ProvisionOptions& o, ClusterSpec& c) {
  if (o.spread == Spread::kOneZone) return;
  c.cloud = o.network;
  for (size_t i = 0; i < c.groups.size(); ++i) {
    const std::string zone = fmt::format("zone-{}", i + 1);
    c.groups[i].zone = zone;
    c.zone_region[zone] =
        o.spread == Spread::kZones ? std::string("region-1") : fmt::format("region-{}", i + 1);
  }
}

}  // namespace

void price_mix(const Evaluator& ev, ProvisionedMix& m) {
  const Prediction& p = m.best.predicted;
  m.tokens_per_s = p.tokens_per_s;
  m.transfer = transfer_per_step(ev, m.best.strategy, p);
  if (p.iteration_s > 0) m.transfer_dollars_per_hour = m.transfer.dollars * 3600 / p.iteration_s;
  const double tokens_per_hour = m.tokens_per_s * 3600;
  if (tokens_per_hour <= 0) return;
  m.dollars_per_million_tokens = m.total_dollars_per_hour() / tokens_per_hour * 1e6;
  m.transfer_dollars_per_million_tokens = m.transfer_dollars_per_hour / tokens_per_hour * 1e6;
}

ProvisionResult provision(const ModelSpec& model, const Profile& profile,
                          const ProvisionOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  if (o.node_types.empty()) throw InputError("--nodes: expected at least one node type");
  if (o.spread != Spread::kOneZone && !o.network)
    throw InputError("--spread: expected --network too (the links between zones and their price)");
  if (o.time_limit_s < 0)
    throw InputError(fmt::format("--time-limit: expected >= 0 seconds, got {}", o.time_limit_s));
  std::vector<NodeSpec> nodes;
  for (size_t i = 0; i < o.node_types.size(); ++i) {
    for (size_t j = 0; j < i; ++j)
      if (o.node_types[j] == o.node_types[i])
        throw InputError(
            fmt::format("--nodes: {} is listed twice (each node type once; "
                        "--max-nodes sets how many of each are tried)",
                        o.node_types[i]));
    nodes.push_back(load_node(o.node_types[i]));
  }
  // The largest mix, refused up front when it is larger than a search plans for (a count alone
  // past it first: the counts double up to it).
  if (o.max_nodes_per_type > kMaxSearchGpus)
    throw InputError(
        fmt::format("--max-nodes {}: expected at most {} (the GPUs a training search "
                    "plans for; docs/search.md, \"Limits\")",
                    o.max_nodes_per_type, kMaxSearchGpus));
  const std::vector<int64_t> counts = counts_up_to(o.max_nodes_per_type);
  std::vector<int64_t> gpus_per_node;
  for (const NodeSpec& n : nodes) gpus_per_node.push_back(n.gpus);
  std::sort(gpus_per_node.rbegin(), gpus_per_node.rend());
  int64_t largest = 0;
  for (size_t i = 0; i < gpus_per_node.size() && static_cast<int64_t>(i) < o.max_types; ++i)
    largest += counts.back() * gpus_per_node[i];
  if (largest > kMaxSearchGpus)
    throw InputError(fmt::format(
        "--max-nodes {}: the largest mix ({} nodes of each of the {} largest node types) has {} "
        "GPUs; the training search plans for at most {} (docs/search.md, \"Limits\")",
        o.max_nodes_per_type, counts.back(), std::min<int64_t>(o.max_types, nodes.size()), largest,
        kMaxSearchGpus));
  std::vector<std::vector<int64_t>> mixes;
  std::vector<int64_t> current(nodes.size(), 0);
  enumerate(nodes, counts, o.max_types, 0, current, mixes);

  ProvisionResult result;
  const auto elapsed_s = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  for (size_t k = 0; k < mixes.size(); ++k) {
    if (o.progress) o.progress(k, mixes.size());
    const double left_s = o.time_limit_s - elapsed_s();
    if (o.time_limit_s > 0 && left_s <= 0) {
      result.time_limit_reached = true;
      result.mixes_not_searched = static_cast<int64_t>(mixes.size() - k);
      break;
    }
    ClusterSpec cluster;
    double price = 0;
    std::string name;
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (mixes[k][i] == 0) continue;
      cluster.groups.push_back({nodes[i], mixes[k][i], ""});
      price += nodes[i].price_per_hour * static_cast<double>(mixes[k][i]);
      name += fmt::format("{}{}:{}", name.empty() ? "" : ",", nodes[i].name, mixes[k][i]);
    }
    if (o.max_price_per_hour > 0 && price > o.max_price_per_hour) {
      if (result.over_budget++ == 0 || price < result.cheapest_over_price) {
        result.cheapest_over = name;
        result.cheapest_over_price = price;
      }
      continue;
    }
    cluster.name = name;
    cluster.origin = "provision " + name;
    spread_groups(o, cluster);
    ++result.mixes_tried;
    const CostModel cost(profile, cluster);
    const Evaluator ev(model, cluster, cost, o.framework);
    SearchOptions so = o.search;
    so.top_k = 1;
    so.progress = nullptr;
    if (o.time_limit_s > 0) so.time_limit_s = left_s;
    SearchResult r = search_training(ev, so);
    result.time_limit_reached |= r.stats.time_limit_reached;
    ProvisionedMix mix;
    mix.cluster = cluster;
    mix.price_per_hour = price;
    if (!r.top.empty()) {
      mix.feasible = true;
      mix.best = std::move(r.top.front());
      price_mix(ev, mix);
    }
    result.mixes.push_back(std::move(mix));
  }
  if (o.progress && !result.time_limit_reached) o.progress(mixes.size(), mixes.size());
  std::stable_sort(result.mixes.begin(), result.mixes.end(),
                   [](const ProvisionedMix& a, const ProvisionedMix& b) {
                     if (a.feasible != b.feasible) return a.feasible;
                     return a.tokens_per_s > b.tokens_per_s;
                   });
  for (auto& m : result.mixes) {
    if (!m.feasible) continue;
    m.pareto = std::none_of(result.mixes.begin(), result.mixes.end(), [&](const ProvisionedMix& x) {
      const double xp = x.total_dollars_per_hour(), mp = m.total_dollars_per_hour();
      return x.feasible && &x != &m && xp <= mp && x.tokens_per_s >= m.tokens_per_s &&
             (xp < mp || x.tokens_per_s > m.tokens_per_s);
    });
  }
  result.elapsed_s = elapsed_s();
  return result;
}

}  // namespace hetplan
