// The time of one iteration's pipeline on given stage times: the schedule's makespan, bubble and
// the micro-batch activations each stage holds at its peak.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hetplan {

struct StageTimes {
  // Per pipeline stage (device), one micro-batch: forward, input-gradient and weight-gradient
  // times, and the p2p time of one activation to the next stage (size stages - 1).
  std::vector<double> forward_s, backward_input_s, backward_weight_s, p2p_s;
};

struct PipelineTiming {
  bool feasible = true;
  std::string reason;
  double makespan_s = 0;
  double bubble_rate = 0;
  std::vector<double> in_flight;  // micro-batch activations held at the peak, per stage
};

// Names the schedules `pipeline_timing` knows.
std::vector<std::string> pipeline_schedule_names();
bool is_pipeline_schedule(const std::string& name);

PipelineTiming pipeline_timing(const std::string& schedule, int64_t microbatches, int64_t chunks,
                               const StageTimes& t);

}  // namespace hetplan
