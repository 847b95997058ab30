// Helix's placement files (*_sol.ini): `[Settings] offset = 2` and `[Solution]` with one line
// `compute_node_N=[first, ..., last]` per machine, N = the machine's index in the cluster plus the
// offset (Helix numbers its source and sink 0 and 1). Read for `serve --placement`, written by
// `serve --write-sol` so that Helix's own tools take hetplan's placements.
#pragma once

#include <filesystem>
#include <string>

#include "serve/placement.h"
#include "serve/serving_cluster.h"

namespace hetplan::serve {

// Helix's offset between compute_node_N and the machine's index.
inline constexpr int kHelixNodeOffset = 2;

// Reads a Helix placement for `cluster`. compute_node_N names the machine of that name (a
// simulator_cluster.ini's), else ComputeNode-(N - offset) (a topology's), else, in a cluster that
// names no machine either way (hetplan's own files), the machine at index N - offset.
Placement read_helix_solution(const std::filesystem::path& path, const ServingCluster& cluster,
                              int num_layers);

// The text of the *_sol.ini for `placement`, byte for byte as Helix writes it: every machine in
// the cluster's order, an unused one with `[]`.
std::string helix_solution_text(const Placement& placement, const ServingCluster& cluster);

// Writes helix_solution_text() to `path` (atomically). Throws InputError when it cannot.
void write_helix_solution(const std::filesystem::path& path, const Placement& placement,
                          const ServingCluster& cluster);

}  // namespace hetplan::serve
