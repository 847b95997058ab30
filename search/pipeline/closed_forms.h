// Closed forms for schedules whose timing has one: the same numbers the simulator produces for
// their orders, in O(p) instead of O(p m). Tests check them against the simulator.
#pragma once

#include <optional>

#include "search/pipeline/schedule.h"
#include "search/pipeline/simulator.h"

namespace hetplan::pipeline {

// GPipe with any per-stage times and p2p delays. All forwards form a flow shop of identical jobs,
// so F of stage s, micro-batch j ends at sum_{t<=s}(F_t) + sum_{t<s}(p2p_t) + j * max_{t<=s} F_t;
// the backwards form the same flow shop in reverse, starting when the last stage's forwards end.
PipelineResult gpipe_closed_form(int devices, int microbatches, const StageTimes& times);

// 1F1B when every stage has the same F and B+W and there is no p2p delay: makespan
// (m + p - 1)(F + B + W), device i busy from i*F to makespan - i*(B + W). Empty otherwise.
std::optional<PipelineResult> one_f_one_b_closed_form(int devices, int microbatches,
                                                      const StageTimes& times);

}  // namespace hetplan::pipeline
