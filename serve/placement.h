// A serving placement: each machine holds one contiguous range of layers, or none.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "serve/serving_cluster.h"

namespace hetplan::serve {

// Layers [start, start + count); count 0 = the machine is not used.
struct LayerRange {
  int start = 0;
  int count = 0;

  int end() const { return start + count; }
  bool empty() const { return count == 0; }
  bool operator==(const LayerRange&) const = default;
};

// One range per machine of the cluster, in the cluster's machine order.
struct Placement {
  std::vector<LayerRange> ranges;

  bool operator==(const Placement&) const = default;
  int used_machines() const;
};

// Reads a placement for `cluster`: a hetplan placement JSON ({"placement": [{"machine": NAME,
// "layers": [first, last]}]}, also the output of `hetplan serve --json`) or a Helix *_sol.ini.
Placement load_placement(const std::filesystem::path& path, const ServingCluster& cluster,
                         int num_layers);

// Reads a hetplan placement JSON (see load_placement).
Placement read_placement_json(const std::filesystem::path& path, const ServingCluster& cluster,
                              int num_layers);

}  // namespace hetplan::serve
