// The event-driven simulator: times a PassOrder against per-stage durations. Dependencies: F of
// stage s after F of s-1, B of s after B of s+1 and after F of s, W after B of the same stage and
// micro-batch; a p2p delay is added where the two stages sit on different devices.
#pragma once

#include <vector>

#include "search/pipeline/pass_order.h"
#include "search/pipeline/schedule.h"

namespace hetplan::pipeline {

// Durations per virtual stage (model order) and delays per stage boundary, already expanded.
struct StageTimes {
  std::vector<double> forward_s, backward_input_s, backward_weight_s;  // size stages
  std::vector<double> p2p_s;                                           // size stages-1
  std::vector<double> activation_bytes;                                // size stages, or empty
};

// Expands a problem's vectors (size 1 or full) to `stages` entries. Throws InputError on sizes or
// on negative or non-finite values.
StageTimes expand_times(const PipelineProblem& problem, int stages);

// How the simulator treats the order.
enum class Executor {
  kExact,   // every device runs its passes exactly in order, each as soon as it can
  kGuided,  // the order is a priority: a ready B may run ahead of a waiting pass and a W may fill
            // a gap it fits in, never past the next F (so the peak never exceeds the order's)
};

// Simulates one order. Where the order does not split the backward, B lasts B+W.
PipelineResult execute(const PassOrder& order, const StageTimes& times, Executor executor,
                       bool record_timeline);

// The order in which the guided executor actually ran the passes for these times: a pass order of
// its own, which the exact executor times no slower for them.
PassOrder guided_order(const PassOrder& order, const StageTimes& times);

}  // namespace hetplan::pipeline
