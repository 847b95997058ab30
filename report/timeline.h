// A pipeline timeline for the report: the prediction's per-stage times run through the exact
// event-driven simulator (search/pipeline) with the strategy's own schedule, so that the picture
// is the schedule the prediction timed (interleaved and V schedules included: rows are devices,
// each pass labelled with its chunk).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "search/strategy.h"

namespace hetplan {

struct TimelineOp {
  int64_t device = 0;  // row: the pipeline device
  char pass = 'F';     // F, B (input gradient) or W (weight gradient)
  int64_t microbatch = 0;
  int64_t chunk = 0;  // virtual stage on the device (0 for one-chunk schedules)
  int64_t stage = 0;  // virtual stage in model order
  double start_s = 0, end_s = 0;
};

struct Timeline {
  std::vector<TimelineOp> ops;
  double makespan_s = 0;
  int64_t devices = 0, chunks = 1;
  std::string schedule;
  // Set when there is nothing to draw (and why), or when a schedule that does not split the
  // backward has its B drawn as B followed by W (the framework computes both in one backward).
  std::string note;
};

// `microbatches` per pipeline over `devices` pipeline devices; the prediction's stages are its
// virtual stages in model order (a multiple of `devices`).
Timeline pipeline_timeline(const Prediction& p, const std::string& schedule, int64_t microbatches,
                           int64_t devices);

}  // namespace hetplan
