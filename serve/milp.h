// Placement by mixed-integer programming, solved with CBC. Not Helix's big-M formulation (one
// start variable and one switch per edge, whose LP relaxation is weak) but a flow over layer
// boundaries aggregated by machine class: n[c,s,k] = how many machines of class c hold layers
// [s, s + k); g[c,s,k,b] = the flow such machines take in at boundary b (b = s, or any later
// boundary inside the range with partial inference) and hand on at s + k. Flow is conserved at
// every boundary and bounded by capacity(c, k) * n[c,s,k]. Where links do not limit the flow
// (every pair of machines joined, bandwidth above the machines' capacities) this is exactly the
// max flow of the placement; otherwise it is an upper bound, and the planner re-scores every
// result with the exact max flow. Formulation and its exactness argument: docs/serving.md.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "serve/capacity.h"
#include "serve/placement.h"

namespace hetplan::serve {

struct MilpOptions {
  double time_limit_s = 30;  // wall clock, the LPs before branch and bound included
  int threads = 1;
  int64_t max_nodes = 20000;  // branch-and-bound nodes (a deterministic work limit)
  uint64_t seed = 1;
  bool log = false;  // CBC's own log on stdout
  // >= 0: a neighbourhood MILP where each machine class may only hold layer counts within this
  // distance of the counts it holds in the best start (tighter LP, much faster); < 0: all counts.
  int layer_count_window = -1;
};

struct MilpResult {
  bool solved = false;                // a feasible placement was found (or the warm start was kept)
  bool optimal = false;               // proven optimal (within CBC's default gap)
  Placement placement;                // valid when solved
  double objective_tokens_per_s = 0;  // the MILP's flow for that placement
  double lp_bound_tokens_per_s = 0;   // LP relaxation of this MILP (of the neighbourhood)
  double best_bound_tokens_per_s = 0;  // CBC's best bound when it stopped
  int64_t nodes = 0;
  double elapsed_s = 0;
  int columns = 0, integer_columns = 0, rows = 0;
};

// Solves the placement MILP, warm-started from the best of `starts` (valid placements).
// The root LP bound of the full MILP (every layer count allowed): an upper bound on the max flow
// of any placement in the flow model, tighter than flow_upper_bound(). Empty when the LP is not
// solved within `time_limit_s` (building the model included).
std::optional<double> milp_upper_bound(const ServingProblem& problem, double time_limit_s = 60);

MilpResult solve_placement_milp(const ServingProblem& problem, const std::vector<Placement>& starts,
                                const MilpOptions& options);

}  // namespace hetplan::serve
