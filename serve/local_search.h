// Solver-free placement search: simulated annealing over the machines' layer ranges, each
// candidate scored by its exact max flow (plus a small tie-breaker that rewards raising the
// weakest layers, so that plateaus of equal max flow can be crossed).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "serve/capacity.h"
#include "serve/placement.h"

namespace hetplan::serve {

struct LocalSearchOptions {
  int64_t evaluations = 200000;  // max-flow evaluations (the deterministic budget)
  double time_limit_s = 60;      // stops earlier when reached
  uint64_t seed = 1;
  // Initial temperature as a share of the start's max flow; cools geometrically to ~0.
  double start_temperature = 0.02;
  // Called about every second with (evaluations so far, best max flow); may be empty.
  std::function<void(int64_t, double)> progress;
};

struct LocalSearchResult {
  Placement placement;
  double max_flow_tokens_per_s = 0;
  int64_t evaluations = 0;
  double elapsed_s = 0;
};

// Per layer, the summed arc capacity of the machines holding it (the searches' tie-breaker).
std::vector<double> layer_coverage(const ServingProblem& problem, const Placement& placement);

// Improves `start` (which must be valid); never returns a placement worse than `start`, and every
// placement it returns is valid (placement_errors() is empty).
LocalSearchResult local_search(const ServingProblem& problem, const Placement& start,
                               const LocalSearchOptions& options);

}  // namespace hetplan::serve
