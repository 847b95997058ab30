// Splits a model's layers into contiguous pipeline stages of unequal speed and memory: a dynamic
// program that minimises the slowest stage's time under each stage's memory limit.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

namespace hetplan {

struct PartitionInput {
  // Per stage (outer) and layer (inner): time of the layer on that stage's GPUs (one micro-batch,
  // all passes), the bytes it holds regardless of micro-batches in flight (weights, gradients,
  // optimizer state), the activation bytes of one micro-batch, and its transient working bytes.
  std::vector<std::vector<double>> time_s;
  std::vector<std::vector<double>> static_bytes;
  std::vector<std::vector<double>> activation_bytes;
  std::vector<std::vector<double>> transient_bytes;
  std::vector<double> in_flight;    // micro-batch activations each stage holds at its peak
  std::vector<double> limit_bytes;  // usable memory per stage (device memory minus reserve)
};

struct PartitionResult {
  bool feasible = false;
  std::vector<std::pair<int64_t, int64_t>> ranges;  // [first, last] per stage
  double max_stage_s = 0;
  double max_device_s = 0;  // the busiest device's time, where a device-level split sets it
};

// Exact: O(stages x layers^2). Among partitions with the same slowest stage, prefers the one with
// the smaller sum of stage times, then the earlier cut (deterministic).
PartitionResult partition_layers(const PartitionInput& in);

// The time of the slowest stage of `ranges` ([first, last] per stage) on its stage's GPUs.
double slowest_stage_s(const PartitionInput& in,
                       const std::vector<std::pair<int64_t, int64_t>>& ranges);

}  // namespace hetplan

namespace hetplan {

// The same minimum of the slowest stage (to a relative 1e-4), by bisection on the bound T: for each
// T a backward sweep finds which suffixes of layers the remaining stages can hold (two pointers per
// stage), O(stages x layers) per T instead of O(stages x layers^2); then each stage takes the
// longest run that leaves a feasible rest. For the search's inner loop; ties may cut differently
// from the DP.
PartitionResult partition_layers_greedy(const PartitionInput& in);

// For schedules that run several virtual stages per device (interleaved, the V family), where a
// device's busy time is the sum of its stages' and bounds the iteration: starting from `start`,
// moves a layer at a time out of the busiest device's stages into a neighbouring stage while that
// lowers the busiest device's load (then the sum of squared loads), no stage getting slower than
// the slowest stage of `start`. `device_of_stage[j]` is stage
// j's device; a move that would put a device's weights, optimizer state and one micro-batch of
// activations over `device_limit_bytes` (when given) is not made. Every stage keeps a layer.
PartitionResult balance_device_loads(const PartitionInput& in,
                                     const std::vector<int64_t>& device_of_stage,
                                     const std::vector<double>& device_limit_bytes,
                                     PartitionResult start);

// Exact for the V placement (stage j on device j for j < P, on 2P-1-j after the turn; the stages
// come in pairs, so time_s has 2P rows): the split with the least busiest-device time (the sum of
// its two stages'), and among those the least sum of squared stage times (balanced stages: the
// schedule's bubbles depend on them). Device d's two runs must fit device_limit_bytes[d] (none
// when empty): the static and in_flight x activation bytes of both plus their largest transient.
// The least busiest device is found by bisection on a cap, each step a sweep from the outer
// devices inwards over the (front end, back start) pairs the cap and memory leave reachable;
// O(P x L^4) at worst, far less near the optimum, where few pairs remain.
// `hint` (may be empty) is a split to start the bisection from when it fits.
PartitionResult partition_v_devices(const PartitionInput& in,
                                    const std::vector<double>& device_limit_bytes,
                                    const std::vector<std::pair<int64_t, int64_t>>& hint = {});

// The schedule's makespan for a split (one range per virtual stage).
using SplitMakespan = std::function<double(const std::vector<std::pair<int64_t, int64_t>>& ranges)>;

// The busiest device's time is a bound, not the makespan: which device waits how long to start
// and to drain depends on the stage times. From `start`, moves one layer out of a stage into
// another along the chain of stages between them (every stage in between shifts by one layer)
// and keeps the first move that lowers `makespan`; moves that would make the busiest device
// busier than it is, or put a device's bytes (as in partition_v_devices) over its limit, are not
// simulated. Stops at a split no such move improves, or after `max_simulations` calls.
PartitionResult refine_by_makespan(const PartitionInput& in,
                                   const std::vector<int64_t>& device_of_stage,
                                   const std::vector<double>& device_limit_bytes,
                                   PartitionResult start, const SplitMakespan& makespan,
                                   int64_t max_simulations);

}  // namespace hetplan
