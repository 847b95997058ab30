// The output of `hetplan serve`: versioned JSON (the contract's fields: max_flow_tokens_per_s,
// placement, routing, baselines, simulation) and the human summary table, a view of the same data.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "costmodel/document.h"
#include "serve/planner.h"

namespace hetplan::serve {

// One placement with what was measured about it.
struct ServeEntry {
  EvaluatedPlacement evaluated;
  std::optional<SimulationResult> simulation;
};

// Everything one `serve` run produced.
struct ServeReport {
  Json context;  // command line, inputs, seed, versions
  const ServingProblem* problem = nullptr;
  ServeEntry chosen;  // hetplan's placement, or the one given with --placement
  std::vector<ServeEntry> baselines;
  std::optional<PlanResult> plan;  // absent when a placement was evaluated
  SimulationConfig simulation_config;
};

Json placement_json(const ServingProblem& problem, const EvaluatedPlacement& e);
Json routing_json(const ServingProblem& problem, const RoutingTable& routing);
Json simulation_json(const SimulationConfig& config, const SimulationResult& s);
Json serve_json(const ServeReport& report);
// A few lines and tables for people.
std::string serve_summary(const ServeReport& report);

}  // namespace hetplan::serve
