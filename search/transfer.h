// The traffic one training step sends over a cluster's priced links (between zones or regions of
// a cloud, costmodel/network.h) and what it costs: gradient synchronisation rings and pipeline
// sends whose two ends are in different zones.
#pragma once

#include <cstdint>
#include <vector>

#include "search/evaluate.h"

namespace hetplan {

struct TransferPerStep {
  double bytes_between_zones = 0;    // over links between two zones of one region
  double bytes_between_regions = 0;  // over links between regions
  double gradient_bytes = 0;         // of both, the data-parallel gradient and weight rings'
  double pipeline_bytes = 0;         // of both, the pipeline's activations and their gradients
  double dollars = 0;                // both, at their links' price_per_GB
  double bytes() const { return bytes_between_zones + bytes_between_regions; }
};

// Adds what a ring over `ring` (global device indices, in ring order, closing back to the first)
// sends over each priced link when every one of its edges carries `edge_bytes`.
void add_ring_crossings(const ClusterSpec& cluster, const std::vector<Device>& devices,
                        const std::vector<int64_t>& ring, double edge_bytes, TransferPerStep& out);

// The priced traffic of one step of `s` as predicted in `p` (feasible): each virtual stage's
// gradient rings (all-reduce 2(N-1)/N of the gradients per edge; under ZeRO a reduce-scatter of
// the gradients and the weight gathers, Rajbhandari et al. 2020) and its sends to the next stage
// (one activation forward and its gradient back per micro-batch and data-parallel slice). Zero
// on a cluster in one zone.
TransferPerStep transfer_per_step(const Evaluator& ev, const Strategy& s, const Prediction& p);

}  // namespace hetplan
