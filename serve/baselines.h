// Placements the planner compares against, built for any cluster: Petals-like, Swarm-like and
// separate homogeneous pipelines per machine type; and hetplan's own greedy start.
#pragma once

#include <chrono>

#include <cstdint>
#include <string>
#include <vector>

#include "serve/capacity.h"
#include "serve/placement.h"

namespace hetplan::serve {

// Petals as Helix reimplements it (Petals appendix D): machines join in a random order (seeded),
// each holds as many layers as fit and takes the window whose capacities, sorted ascending, are
// lexicographically smallest (it serves the current bottleneck).
Placement petals_placement(const ServingProblem& problem, uint64_t seed);

// Swarm as Helix reimplements it: the model is cut into equal stages (the largest stage size that
// divides the layer count and fits on every machine); machines, fastest first, join the stage
// with the least capacity so far.
Placement swarm_placement(const ServingProblem& problem);

// Separate pipelines of one machine type each: every type forms as many pipelines as its machines
// allow (ceil(L / max layers) machines per pipeline, layers split evenly); leftovers stay idle.
Placement homogeneous_placement(const ServingProblem& problem);

// Places machines with `layers[i]` layers each (0 = unused), largest capacity first, each at the
// window that raises the lowest per-layer capacity most (Petals' rule with a chosen layer count).
Placement water_fill(const ServingProblem& problem, const std::vector<int>& layers);

// hetplan's greedy start: one layer count per machine class, chosen by coordinate ascent on the
// max flow of water_fill(); the ascent stops at `deadline` (the first placement is always made).
Placement greedy_placement(
    const ServingProblem& problem,
    std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max());

// Groups of interchangeable machines (same machine type, VRAM and NICs), in first-seen order.
std::vector<std::vector<int>> machine_classes(const ServingProblem& problem);

}  // namespace hetplan::serve
