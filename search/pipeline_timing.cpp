#include "search/pipeline_timing.h"

#include <algorithm>
#include <numeric>

namespace hetplan {

std::vector<std::string> pipeline_schedule_names() { return {"gpipe", "1f1b"}; }

bool is_pipeline_schedule(const std::string& name) {
  const auto names = pipeline_schedule_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

PipelineTiming pipeline_timing(const std::string& schedule, int64_t m, int64_t /*chunks*/,
                               const StageTimes& t) {
  PipelineTiming r;
  const size_t p = t.forward_s.size();
  std::vector<double> cycle(p);
  for (size_t s = 0; s < p; ++s)
    cycle[s] = t.forward_s[s] + t.backward_input_s[s] + t.backward_weight_s[s];
  // Fill and drain cross every boundary once each way; in the steady state the slowest stage or
  // the slowest link (one transfer each way per micro-batch, full duplex) sets the pace.
  double p2p_fill = 0, p2p_max = 0;
  for (double c : t.p2p_s) {
    p2p_fill += 2 * c;
    p2p_max = std::max(p2p_max, c);
  }
  const double slowest = std::max(*std::max_element(cycle.begin(), cycle.end()), p2p_max);
  const double total = std::accumulate(cycle.begin(), cycle.end(), 0.0);
  r.makespan_s = total + p2p_fill + static_cast<double>(m - 1) * slowest;
  const double busy = total * static_cast<double>(m);
  r.bubble_rate = 1 - busy / (static_cast<double>(p) * r.makespan_s);
  r.in_flight.resize(p);
  for (size_t s = 0; s < p; ++s)
    r.in_flight[s] = schedule == "gpipe" ? static_cast<double>(m)
                                         : static_cast<double>(std::min<int64_t>(m, p - s));
  return r;
}

}  // namespace hetplan
