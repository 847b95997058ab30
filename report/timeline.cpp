#include "report/timeline.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace hetplan {
namespace {

struct ScheduledPass {
  char kind;  // F or B (W follows B)
  int64_t mb;
};

std::vector<ScheduledPass> stage_order(bool gpipe, int64_t stage, int64_t stages, int64_t m) {
  std::vector<ScheduledPass> order;
  if (gpipe) {
    for (int64_t i = 0; i < m; ++i) order.push_back({'F', i});
    for (int64_t i = 0; i < m; ++i) order.push_back({'B', i});
    return order;
  }
  const int64_t warmup = std::min(stages - stage - 1, m);
  for (int64_t i = 0; i < warmup; ++i) order.push_back({'F', i});
  for (int64_t i = 0; i + warmup < m; ++i) {
    order.push_back({'F', i + warmup});
    order.push_back({'B', i});
  }
  for (int64_t i = m - warmup; i < m; ++i) order.push_back({'B', i});
  return order;
}

}  // namespace

Timeline pipeline_timeline(const Prediction& p, const std::string& schedule, int64_t m) {
  Timeline t;
  const int64_t stages = static_cast<int64_t>(p.stages.size());
  if (stages == 0 || m <= 0) return t;
  const bool gpipe = schedule == "gpipe";
  t.schedule = gpipe ? "gpipe" : "1f1b";
  if (!gpipe && schedule != "1f1b")
    t.note = fmt::format("schedule {} drawn in 1F1B order", schedule);
  std::vector<std::vector<ScheduledPass>> order(stages);
  for (int64_t s = 0; s < stages; ++s) order[s] = stage_order(gpipe, s, stages, m);
  // End times of each stage's F and B of every micro-batch; -1 = not yet run.
  std::vector<std::vector<double>> f_end(stages, std::vector<double>(m, -1));
  std::vector<std::vector<double>> b_end(stages, std::vector<double>(m, -1));
  std::vector<size_t> next(stages, 0);
  std::vector<double> free_at(stages, 0);
  size_t remaining = 0;
  for (const auto& o : order) remaining += o.size();
  // Passes run in each stage's fixed order; a sweep runs every pass whose input is ready. A
  // schedule's order is deadlock-free, so every sweep makes progress.
  while (remaining > 0) {
    bool progressed = false;
    for (int64_t s = 0; s < stages; ++s) {
      while (next[s] < order[s].size()) {
        const ScheduledPass pass = order[s][next[s]];
        const StagePrediction& st = p.stages[s];
        double ready = 0;
        if (pass.kind == 'F' && s > 0) {
          if (f_end[s - 1][pass.mb] < 0) break;
          ready = f_end[s - 1][pass.mb] + p.stages[s - 1].p2p_s;
        } else if (pass.kind == 'B') {
          const double own = f_end[s][pass.mb];
          if (own < 0) break;
          ready = own;
          if (s + 1 < stages) {
            if (b_end[s + 1][pass.mb] < 0) break;
            ready = std::max(ready, b_end[s + 1][pass.mb] + st.p2p_s);
          }
        }
        const double start = std::max(free_at[s], ready);
        if (pass.kind == 'F') {
          const double end = start + st.forward_s;
          t.ops.push_back({s, 'F', pass.mb, start, end});
          f_end[s][pass.mb] = free_at[s] = end;
        } else {
          const double mid = start + st.backward_input_s;
          t.ops.push_back({s, 'B', pass.mb, start, mid});
          b_end[s][pass.mb] = mid;
          free_at[s] = mid + st.backward_weight_s;
          if (st.backward_weight_s > 0) t.ops.push_back({s, 'W', pass.mb, mid, free_at[s]});
        }
        ++next[s];
        --remaining;
        progressed = true;
      }
    }
    if (!progressed) break;  // cannot happen for the orders above
  }
  for (double f : free_at) t.makespan_s = std::max(t.makespan_s, f);
  return t;
}

}  // namespace hetplan
