// Local search for clusters that do not link every pair of machines (Helix's
// simulator_cluster.ini lists only the links one placement used). The moves of local_search.cpp
// place ranges without looking at links, and on such a cluster almost all of them cut every path
// from the clients to the clients. Here a machine only takes ranges its links can carry: it starts
// where a linked machine hands over (or at layer 0 when the clients link to it) and ends where a
// linked machine can go on (or at the last layer when it links to the clients).
#pragma once

#include "serve/local_search.h"

namespace hetplan::serve {

// Simulated annealing over link-respecting moves, scored by the exact max flow (plus
// local_search's tie-breaker). Never returns less than `start`, and only valid placements.
LocalSearchResult link_local_search(const ServingProblem& problem, const Placement& start,
                                    const LocalSearchOptions& options);

}  // namespace hetplan::serve
