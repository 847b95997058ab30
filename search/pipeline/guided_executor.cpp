// The guided executor: list scheduling in time order with a pass order as the priority. A ready B
// may run ahead of a W at the head of the order; while the head waits, a ready B, or a W that ends
// before the head is ready, may run; nothing passes the next F, so the peak stays the order's.
#include <cmath>
#include <functional>
#include <queue>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "search/pipeline/simulator_run.h"

namespace hetplan::pipeline {
namespace detail {
namespace {

// How far past a waiting pass the guided executor looks for a ready B or a W that fits a gap.
constexpr int kGuidedWindow = 8;

}  // namespace

// Guided executor: list scheduling in time order with the pass order as priority.
PipelineResult run_guided(const PassOrder& order, const StageTimes& times, bool record,
                          std::vector<std::vector<Pass>>* sequences) {
  Run run(order, times, true);
  const int p = order.devices;
  std::vector<std::vector<char>> taken(p);
  std::vector<size_t> head(p, 0), left(p);
  std::vector<double> free_at(p, 0.0), scheduled(p, kNotYet);
  for (int d = 0; d < p; ++d) {
    taken[d].assign(order.per_device[d].size(), 0);
    left[d] = order.per_device[d].size();
  }
  using Event = std::pair<double, int>;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events;
  auto wake = [&](int d, double at) {
    if (left[d] == 0) return;
    at = std::max(at, free_at[d]);
    if (std::isnan(scheduled[d]) || at < scheduled[d]) {
      scheduled[d] = at;
      events.push({at, d});
    }
  };
  for (int d = 0; d < p; ++d) wake(d, 0.0);
  size_t ignored = 0;
  while (!events.empty()) {
    double t = events.top().first;
    const int d = events.top().second;
    events.pop();
    if (t != scheduled[d]) continue;  // superseded by an earlier wake-up
    scheduled[d] = kNotYet;
    const auto& list = order.per_device[d];
    // Decide for d at time t; keep going while d's next decision comes before any other event.
    for (;;) {
      while (head[d] < list.size() && taken[d][head[d]]) ++head[d];
      const size_t h = head[d];
      const double head_ready = run.ready(list[h], &ignored);
      const bool head_now = !std::isnan(head_ready) && head_ready <= t;
      // The first B within the window and before the next F, if it is ready now.
      auto ready_b = [&]() -> size_t {
        int seen = 0;
        for (size_t j = h + 1; j < list.size() && seen < kGuidedWindow; ++j) {
          if (taken[d][j]) continue;
          ++seen;
          if (list[j].op == Op::kF) break;
          if (list[j].op == Op::kB) {
            const double r = run.ready(list[j], &ignored);
            return !std::isnan(r) && r <= t ? j : list.size();
          }
        }
        return list.size();
      };
      size_t pick = h;
      if (head_now) {
        if (list[h].op == Op::kW) {
          const size_t b = ready_b();
          if (b < list.size()) pick = b;  // the B feeds another device; the W can wait
        }
      } else {
        pick = ready_b();
        if (pick == list.size() && !std::isnan(head_ready)) {
          int seen = 0;
          for (size_t j = h + 1; j < list.size() && seen < kGuidedWindow; ++j) {
            if (taken[d][j]) continue;
            ++seen;
            if (list[j].op == Op::kF) break;
            if (list[j].op != Op::kW) continue;
            const double r = run.ready(list[j], &ignored);
            if (!std::isnan(r) && r <= t && t + run.duration(list[j]) <= head_ready) pick = j;
            break;
          }
        }
      }
      if (pick == list.size()) {
        if (!std::isnan(head_ready)) wake(d, head_ready);
        break;  // otherwise a finishing dependency wakes this device
      }
      const Pass ps = list[pick];
      taken[d][pick] = 1;
      --left[d];
      const double end = run.run(d, ps, t);
      free_at[d] = end;
      run.for_dependent_devices(ps, [&](int other) { wake(other, end); });
      if (left[d] == 0) break;
      if (!events.empty() && !(end < events.top().first)) {
        wake(d, end);
        break;
      }
      t = end;
    }
  }
  for (int d = 0; d < p; ++d)
    if (left[d] != 0)
      throw std::logic_error(
          fmt::format("pipeline order '{}' deadlocks on device {} (guided)", order.variant, d));
  PipelineResult r = run.result(record);
  if (sequences) *sequences = run.take_sequences();
  return r;
}

}  // namespace detail

PassOrder guided_order(const PassOrder& order, const StageTimes& times) {
  PassOrder derived = order;
  detail::run_guided(order, times, false, &derived.per_device);
  derived.variant = order.variant + ", as the guided executor ran it";
  derived.peaks = order_peaks(derived);
  return derived;
}

}  // namespace hetplan::pipeline
