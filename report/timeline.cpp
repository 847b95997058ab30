#include "report/timeline.h"

#include <algorithm>

#include <fmt/format.h>

#include "costmodel/errors.h"
#include "search/pipeline/schedule.h"

namespace hetplan {

Timeline pipeline_timeline(const Prediction& p, const std::string& schedule, int64_t m,
                           int64_t devices) {
  Timeline t;
  t.schedule = schedule;
  const int64_t stages = static_cast<int64_t>(p.stages.size());
  if (stages == 0 || m <= 0 || devices <= 0) {
    t.note = "no pipeline to draw";
    return t;
  }
  if (stages % devices != 0) {
    t.note = fmt::format("{} stages do not split over {} devices: not drawn", stages, devices);
    return t;
  }
  pipeline::PipelineProblem problem;
  problem.devices = static_cast<int>(devices);
  problem.microbatches = static_cast<int>(m);
  problem.chunks = static_cast<int>(stages / devices);
  for (int64_t j = 0; j < stages; ++j) {
    const StagePrediction& st = p.stages[j];
    problem.forward_s.push_back(st.forward_s);
    problem.backward_input_s.push_back(st.backward_input_s);
    problem.backward_weight_s.push_back(st.backward_weight_s);
    if (j + 1 < stages) problem.p2p_s.push_back(st.p2p_s);
  }
  if (problem.p2p_s.empty()) problem.p2p_s = {0.0};
  problem.record_timeline = true;
  pipeline::PipelineResult r;
  try {
    r = pipeline::simulate(schedule, problem);
  } catch (const InputError& e) {
    t.note = fmt::format("schedule {} not drawn: {}", schedule, e.what());
    return t;
  }
  if (!r.feasible) {
    t.note = fmt::format("schedule {} not drawn: {}", schedule, r.reason);
    return t;
  }
  t.devices = devices;
  t.chunks = problem.chunks;
  t.makespan_s = r.makespan_s;
  const bool split = pipeline::schedule_info(schedule).splits_backward;
  if (!split)
    t.note = fmt::format(
        "{} does not split the backward: each B is drawn as its input-gradient "
        "part followed by its weight-gradient part (W)",
        schedule);
  for (const pipeline::TimedPass& pass : r.timeline) {
    TimelineOp op{pass.device, pass.op,      pass.microbatch, pass.chunk,
                  pass.stage,  pass.start_s, pass.end_s};
    const StagePrediction& st = p.stages[pass.stage];
    if (!split && pass.op == 'B' && st.backward_weight_s > 0) {
      op.end_s = pass.start_s + st.backward_input_s;
      t.ops.push_back(op);
      op.pass = 'W';
      op.start_s = op.end_s;
      op.end_s = pass.end_s;
    }
    t.ops.push_back(op);
  }
  return t;
}

}  // namespace hetplan
