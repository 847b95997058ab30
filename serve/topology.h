// Placements and diagnoses that follow the cluster's links. Placements built without looking at
// the links (water filling, Petals, Swarm) serve nothing on a sparse topology such as Helix's
// simulator_cluster.ini, which lists only the links one placement used; chain_placement() builds
// pipelines along the links instead, and the why_* functions say why a flow is 0.
#pragma once

#include <chrono>
#include <string>

#include "serve/capacity.h"

namespace hetplan::serve {

// Whether every machine has links to and from every other machine and from and to the clients.
bool fully_linked(const ServingCluster& cluster);

// Pipelines along the links, by augmenting chains: the chain of linked machines, clients to
// clients, that carries the most tokens/s (machines not yet placed take as many layers as that
// throughput allows; placed ones are entered where Helix's rule allows, with what they have left),
// then the next chain on what is left, until none carries anything. Stops at `deadline`. All
// idle when no chain holds the model.
Placement chain_placement(
    const ServingProblem& problem,
    std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max());

// Why no placement can serve the model on this cluster ("" when a chain of linked machines holds
// every layer): no room for a layer, too few layers in all, no link from or to the clients, or
// no chain of links.
std::string why_nothing_serves(const ServingProblem& problem);

// Why `placement` has a max flow of 0 ("" when it has not): layers nobody holds, machines with no
// capacity, or which layer the linked machines reach from the clients.
std::string why_no_flow(const ServingProblem& problem, const Placement& placement);

}  // namespace hetplan::serve
