// The serving planner: baselines, hetplan's greedy start, local search and the CBC MILP in one
// run, every candidate scored by the exact max flow; and the evaluation of a given placement.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "serve/capacity.h"
#include "serve/flow.h"
#include "serve/link_bound.h"
#include "serve/milp.h"
#include "serve/placement.h"
#include "serve/routing.h"
#include "serve/simulator.h"

namespace hetplan::serve {

// A placement with its max flow; `errors` says why it is not valid (then its flow counts only the
// machines that fit); `no_flow_reason` why its max flow is 0 ("" when it is not).
struct EvaluatedPlacement {
  std::string name;
  Placement placement;
  FlowResult flow;
  std::vector<std::string> errors;
  std::string no_flow_reason;
  bool valid() const { return errors.empty(); }
};

EvaluatedPlacement evaluate_placement(const ServingProblem& problem, std::string name,
                                      Placement placement);

// The baselines evaluated next to every plan: petals, swarm, homogeneous.
std::vector<EvaluatedPlacement> evaluate_baselines(const ServingProblem& problem, uint64_t seed);

struct PlannerOptions {
  double time_limit_s = 60;
  int threads = 1;
  uint64_t seed = 1;
  int64_t local_search_evaluations = 100000;  // per local search (two are run)
  bool use_milp = true;
  int64_t milp_nodes = 20000;
  int milp_layer_count_window = 1;
  // Progress lines for a long search (the CLI prints them on stderr); may be empty.
  std::function<void(const std::string&)> progress;
};

// One step of the search and what it reached.
struct SearchPhase {
  std::string name;
  double max_flow_tokens_per_s = 0;
  double elapsed_s = 0;
  int64_t evaluations = 0;
};

struct PlanResult {
  EvaluatedPlacement best;
  std::string method;  // the phase that found `best`
  std::vector<SearchPhase> phases;
  MilpResult milp;                      // when the MILP ran
  double helix_bound_tokens_per_s = 0;  // Helix's bound: sum of max k * capacity(k) / L
  // The full MILP's LP bound (tighter); absent without the MILP or when not solved in time.
  std::optional<double> milp_upper_bound_tokens_per_s;
  // The link-aware LP bound (link_bound.h); absent when not solved in time.
  std::optional<double> link_upper_bound_tokens_per_s;
  double link_bound_elapsed_s = 0;
  // The least of the bounds above, and which it is.
  TightestBound tightest_bound() const {
    return serve::tightest_bound(helix_bound_tokens_per_s, milp_upper_bound_tokens_per_s,
                                 link_upper_bound_tokens_per_s);
  }
  double elapsed_s = 0;
};

// Searches a placement. Deterministic for a fixed seed and options when the work limits
// (evaluations, MILP nodes) end the searches before the time limit does.
PlanResult plan_serving(const ServingProblem& problem, const PlannerOptions& options);

}  // namespace hetplan::serve
