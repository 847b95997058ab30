// Request routing from a max flow (Helix): at the clients and at every machine, the next hop of a
// request is chosen among the out-edges that carry flow, in proportion to that flow, by
// interleaved weighted round robin (IWRR) over integer weights.
#pragma once

#include <vector>

#include "serve/flow.h"

namespace hetplan::serve {

// One out-edge of a node with its share of the node's outgoing flow.
struct RouteChoice {
  int to = 0;  // machine index or kSink
  double flow_tokens_per_s = 0;
  double share = 0;  // of the node's outgoing flow
  int weight = 0;    // IWRR weight (>= 1)
};

// Interleaved weighted round robin: in cycle c = 1..max weight, every candidate whose weight is
// at least c is served once, in candidate order. Deterministic.
class Iwrr {
 public:
  Iwrr() = default;
  explicit Iwrr(std::vector<int> weights);
  // The next candidate index; -1 when there are no candidates.
  int next();
  int size() const { return static_cast<int>(weights_.size()); }

 private:
  std::vector<int> weights_;
  int max_weight_ = 0;
  int cycle_ = 1;
  int position_ = 0;
};

// The routing weights of every node: out[machine] for machines, out[n] for the clients (source).
struct RoutingTable {
  std::vector<std::vector<RouteChoice>> out;
  const std::vector<RouteChoice>& from(int endpoint) const;
};

// Weights from the flow on each edge; `resolution` = the weight of a node's whole outflow.
RoutingTable routing_from_flow(const ServingProblem& problem, const FlowResult& flow,
                               int resolution = 100);

}  // namespace hetplan::serve
