#include "serve/flow.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

// GCC 12 reports a false -Wmaybe-uninitialized inside Boost.Graph's edge iterators.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/push_relabel_max_flow.hpp>

namespace hetplan::serve {
namespace {

// Capacities are integers in milli-tokens/s: push-relabel is exact on integers, and the result
// does not depend on floating-point rounding inside the algorithm.
constexpr double kScale = 1000.0;
constexpr int64_t kUnlimited = int64_t{1} << 50;

int64_t to_units(double tokens_per_s) {
  if (!(tokens_per_s < static_cast<double>(kUnlimited) / kScale)) return kUnlimited;
  return static_cast<int64_t>(std::floor(std::max(0.0, tokens_per_s) * kScale));
}

using Traits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
using Graph = boost::adjacency_list<
    boost::vecS, boost::vecS, boost::directedS, boost::no_property,
    boost::property<
        boost::edge_capacity_t, int64_t,
        boost::property<boost::edge_residual_capacity_t, int64_t,
                        boost::property<boost::edge_reverse_t, Traits::edge_descriptor>>>>;
using Edge = Traits::edge_descriptor;

struct FlowGraph {
  Graph g;
  int source = 0, sink = 1;
  std::vector<Edge> link_edges;
  std::vector<FlowEdge> link_info;
  std::vector<Edge> machine_edges;  // per machine; only valid where used
  std::vector<bool> used;

  Edge add(int u, int v, int64_t cap) {
    auto capacity = boost::get(boost::edge_capacity, g);
    auto reverse = boost::get(boost::edge_reverse, g);
    Edge e = boost::add_edge(u, v, g).first;
    Edge r = boost::add_edge(v, u, g).first;
    capacity[e] = cap;
    capacity[r] = 0;
    reverse[e] = r;
    reverse[r] = e;
    return e;
  }
};

// Tokens/s machine i's inbound NIC takes of `bytes`-sized tokens.
double nic_in_tokens(const ServingProblem& problem, int i, double bytes) {
  return per_token(problem.cluster.machines()[i].nic_in_GBps, bytes);
}

// Vertices: 0 source, 1 sink, 2 client-side source hub, 3 client-side sink hub, then per machine
// i: in (4 + 3i), out (5 + 3i) and the activation entry (6 + 3i) of a machine holding layer 0.
// Such a machine's inbound NIC takes token ids from the clients (2 bytes per token, on the
// source's edge) and may take activations from other machines (partial inference: 16384 bytes
// per token for LLaMA-2 70B, through the activation entry); each edge is charged what it carries.
FlowGraph build(const ServingProblem& problem, const Placement& placement) {
  const int n = problem.machines();
  const int L = problem.num_layers();
  const ServingModel& model = problem.model;
  const ServingCluster& cluster = problem.cluster;
  FlowGraph fg;
  fg.g = Graph(4 + 3 * n);
  fg.source = 0;
  fg.sink = 1;
  const int src_hub = 2, sink_hub = 3;
  fg.add(fg.source, src_hub, to_units(per_token(cluster.source_nic_GBps, model.token_bytes)));
  fg.add(sink_hub, fg.sink, to_units(per_token(cluster.sink_nic_GBps, model.token_bytes)));
  fg.machine_edges.resize(n);
  fg.used.assign(n, false);
  auto in = [](int i) { return 4 + 3 * i; };
  auto out = [](int i) { return 5 + 3 * i; };
  std::vector<int> entry(n);  // where activations from other machines enter machine i

  auto add_link = [&](int from, int to, int u, int v, double cap) {
    fg.link_edges.push_back(fg.add(u, v, to_units(cap)));
    fg.link_info.push_back({from, to, cap, 0});
  };

  for (int i = 0; i < n; ++i) {
    const LayerRange& r = placement.ranges[i];
    entry[i] = in(i);
    if (r.empty()) continue;
    fg.used[i] = true;
    fg.machine_edges[i] = fg.add(in(i), out(i), to_units(machine_arc_capacity(problem, i, r)));
    if (r.start == 0) {
      if (auto link = cluster.link(kSource, i))
        add_link(kSource, i, src_hub, in(i),
                 std::min(per_token(link->bandwidth_GBps, model.token_bytes),
                          nic_in_tokens(problem, i, model.token_bytes)));
      if (problem.partial_inference && cluster.machines()[i].nic_in_GBps > 0) {
        entry[i] = 6 + 3 * i;
        fg.add(entry[i], in(i),
               to_units(nic_in_tokens(problem, i, model.activation_bytes_per_token)));
      }
    }
    if (r.end() == L)
      if (auto link = cluster.link(i, kSink))
        add_link(i, kSink, out(i), sink_hub, per_token(link->bandwidth_GBps, model.token_bytes));
  }
  for (int i = 0; i < n; ++i) {
    if (!fg.used[i] || placement.ranges[i].end() == L) continue;
    for (int j = 0; j < n; ++j) {
      if (j == i || !fg.used[j] || !continues(problem, placement.ranges[i], placement.ranges[j]))
        continue;
      if (auto link = cluster.link(i, j))
        add_link(i, j, out(i), entry[j],
                 per_token(link->bandwidth_GBps, model.activation_bytes_per_token));
    }
  }
  return fg;
}

}  // namespace

bool continues(const ServingProblem& problem, const LayerRange& from, const LayerRange& to) {
  if (from.empty() || to.empty()) return false;
  if (problem.partial_inference) return to.start <= from.end() && from.end() < to.end();
  return to.start == from.end();
}

double machine_arc_capacity(const ServingProblem& problem, int machine, const LayerRange& range) {
  if (range.empty() || range.count > problem.capacity[machine].max_layers) return 0;
  const Machine& m = problem.cluster.machines()[machine];
  const ServingModel& model = problem.model;
  // A machine's outbound NIC carries token ids to the clients when it holds the last layer (it
  // then feeds no other machine), hidden states otherwise; its inbound NIC hidden states, unless
  // it holds layer 0: then build() charges each inbound edge by what it carries.
  const double out_bytes =
      range.end() == problem.num_layers() ? model.token_bytes : model.activation_bytes_per_token;
  double cap = std::min(problem.capacity[machine].tokens_per_s[range.count],
                        per_token(m.nic_out_GBps, out_bytes));
  if (range.start > 0)
    cap = std::min(cap, per_token(m.nic_in_GBps, model.activation_bytes_per_token));
  return cap;
}

FlowResult solve_flow(const ServingProblem& problem, const Placement& placement) {
  FlowGraph fg = build(problem, placement);
  const int64_t value = boost::push_relabel_max_flow(fg.g, fg.source, fg.sink);
  auto capacity = boost::get(boost::edge_capacity, fg.g);
  auto residual = boost::get(boost::edge_residual_capacity, fg.g);
  auto flow_of = [&](const Edge& e) {
    return static_cast<double>(capacity[e] - residual[e]) / kScale;
  };
  FlowResult result;
  result.max_flow_tokens_per_s = static_cast<double>(value) / kScale;
  const int n = problem.machines();
  result.machine_flow.assign(n, 0.0);
  result.machine_capacity.assign(n, 0.0);
  for (int i = 0; i < n; ++i) {
    if (!fg.used[i]) continue;
    result.machine_flow[i] = flow_of(fg.machine_edges[i]);
    result.machine_capacity[i] = machine_arc_capacity(problem, i, placement.ranges[i]);
  }
  result.edges = fg.link_info;
  for (size_t k = 0; k < fg.link_edges.size(); ++k)
    result.edges[k].flow_tokens_per_s = flow_of(fg.link_edges[k]);
  return result;
}

double max_flow(const ServingProblem& problem, const Placement& placement) {
  FlowGraph fg = build(problem, placement);
  return static_cast<double>(boost::push_relabel_max_flow(fg.g, fg.source, fg.sink)) / kScale;
}

}  // namespace hetplan::serve

#pragma GCC diagnostic pop
