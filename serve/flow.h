// Max-flow evaluation of a placement (Helix's model). Graph: source -> machines holding layer 0;
// machine i -> machine j when j continues where i ends (see ServingProblem::partial_inference);
// machines holding the last layer -> sink. Each machine is an arc in -> out with capacity
// min(compute capacity at its layer count, NIC in, NIC out) in tokens/s; each link's capacity is
// bandwidth / bytes per token (activation between machines, token id to and from clients). NICs
// are charged per edge by what it carries: a machine holding layer 0 takes token ids from the
// clients and, with partial inference, activations from other machines.
// Solved with Boost.Graph's push-relabel on integer milli-tokens/s.
#pragma once

#include <vector>

#include "serve/capacity.h"
#include "serve/placement.h"

namespace hetplan::serve {

// One edge of the flow graph between endpoints (machine index, kSource or kSink).
struct FlowEdge {
  int from = 0;
  int to = 0;
  double capacity_tokens_per_s = 0;
  double flow_tokens_per_s = 0;
};

struct FlowResult {
  double max_flow_tokens_per_s = 0;
  std::vector<double> machine_flow;      // tokens/s through each machine
  std::vector<double> machine_capacity;  // its arc's capacity (0 when unused)
  std::vector<FlowEdge> edges;           // every link edge of the graph, with its flow
};

// Capacity of machine i's arc in tokens/s when it holds `range` (0 for an empty range): compute,
// outbound NIC and, unless it holds layer 0, inbound NIC (then limited per inbound edge).
double machine_arc_capacity(const ServingProblem& problem, int machine, const LayerRange& range);

// Whether requests may go from a machine holding `from` to one holding `to`.
bool continues(const ServingProblem& problem, const LayerRange& from, const LayerRange& to);

// Max flow and the flow on every edge.
FlowResult solve_flow(const ServingProblem& problem, const Placement& placement);

// Max flow only (tokens/s); the search's objective.
double max_flow(const ServingProblem& problem, const Placement& placement);

}  // namespace hetplan::serve
