// Helix's published cluster and placement files (examples/external/helix): cluster topologies
// (cluster*.ini, pruned_cluster.ini) with their machine_profiles.ini, the simulator_cluster.ini
// files written next to each placement (the placements themselves: serve/helix_solution.h).
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include "serve/placement.h"
#include "serve/serving_cluster.h"

namespace hetplan::serve {

// One machine type of machine_profiles.ini, in GBps (1e9 bytes/s); Helix's -1 ("unlimited") is 0.
struct HelixMachineProfile {
  double nic_in_GBps = 0;
  double nic_out_GBps = 0;
  double vram_bytes = 0;
};

// Reads machine_profiles.ini: machine type -> profile (SourceNode and SinkNode included).
std::map<std::string, HelixMachineProfile> read_helix_machine_profiles(
    const std::filesystem::path& path);

// The machine_profiles.ini a Helix topology `cluster_path` is read with when none is given: next to
// it, then in the folders above and their clusters/ subfolders (Helix's
// layouts/<setup>/<method>/pruned_cluster.ini sits three levels below clusters/). Throws
// InputError where there is none.
std::filesystem::path find_machine_profiles(const std::filesystem::path& cluster_path);

// Reads a Helix cluster file. A topology (cluster*.ini, pruned_cluster.ini: [NodeNames],
// [ComputeNode-i], [Link-a-b]) takes machine types from `machine_profiles` (default:
// machine_profiles.ini in the same folder, then in ../../clusters/ as laid out in
// examples/external/helix); a simulator_cluster.ini ([ComputeNodes], [Links]) is self-contained.
// Machines are named ComputeNode-i, or as in the simulator file (compute_node_N).
ServingCluster read_helix_cluster(const std::filesystem::path& path,
                                  const std::filesystem::path& machine_profiles = {});

// "T4x2" -> ("T4", 2); "A100" -> ("A100", 1).
std::pair<std::string, int> split_machine_type(const std::string& machine_type);

}  // namespace hetplan::serve
