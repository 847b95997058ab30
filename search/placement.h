// Where pipeline stages run on a (heterogeneous) cluster: each stage on dp x tp devices of one node
// kind, node kinds in contiguous runs along the pipeline, in an order the search chooses.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "costmodel/hardware.h"
#include "costmodel/topology.h"
#include "search/strategy.h"

namespace hetplan {

// Orders of the cluster's node groups along the pipeline: every permutation for up to 4 kinds,
// else fastest-first and slowest-first by peak FLOP/s.
std::vector<std::vector<int64_t>> node_group_orders(const ClusterSpec& cluster);
// The same over some of the groups only (indices into cluster.groups): the others stay idle.
std::vector<std::vector<int64_t>> node_group_orders(const ClusterSpec& cluster,
                                                    std::vector<int64_t> groups);

// Stages for dp x tp x pp over all the cluster's devices with the node groups in `order`:
// consecutive devices of a group form each stage (tensor rank fastest, so tensor-parallel groups
// stay inside a node). Empty when a group's GPU count is not a multiple of dp x tp, or the stages
// do not come out at pp.
std::optional<std::vector<StageSpec>> place_stages(const ClusterSpec& cluster,
                                                   const std::vector<int64_t>& order, int64_t dp,
                                                   int64_t tp, int64_t pp);

}  // namespace hetplan
