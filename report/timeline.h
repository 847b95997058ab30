// A pipeline timeline drawn from a prediction's per-stage times: every stage runs its passes in
// the schedule's order (GPipe: all forwards, then all backwards; 1F1B: warm-up forwards, then one
// forward and one backward in turn), each pass starting when its stage is free and its input has
// arrived (the previous stage's forward, or the next stage's backward, plus one p2p transfer).
// The weight-gradient pass follows its input-gradient pass. A picture of the schedule for the
// report; the prediction's own iteration time comes from search/pipeline_timing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "search/strategy.h"

namespace hetplan {

struct TimelineOp {
  int64_t stage = 0;
  char pass = 'F';  // F, B (input gradient) or W (weight gradient)
  int64_t microbatch = 0;
  double start_s = 0, end_s = 0;
};

struct Timeline {
  std::vector<TimelineOp> ops;
  double makespan_s = 0;
  std::string schedule;  // the order drawn ("1f1b" or "gpipe")
  std::string note;      // set when the strategy's schedule is drawn as another one
};

// `microbatches` per pipeline; stage times from `p.stages`. Schedules other than gpipe are drawn
// in 1F1B order (with a note) until the exact simulator's timeline replaces this one.
Timeline pipeline_timeline(const Prediction& p, const std::string& schedule, int64_t microbatches);

}  // namespace hetplan
