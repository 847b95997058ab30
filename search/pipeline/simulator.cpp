#include "search/pipeline/simulator.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <queue>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "costmodel/errors.h"

namespace hetplan::pipeline {
namespace {

constexpr double kNotYet = std::numeric_limits<double>::quiet_NaN();
// How far past a waiting pass the guided executor looks for a ready B or a W that fits a gap.
constexpr int kGuidedWindow = 8;

std::vector<double> expand(const std::vector<double>& values, size_t n, const char* what,
                           bool required) {
  if (values.empty()) {
    if (required) throw InputError(fmt::format("{}: no values given", what));
    return std::vector<double>(n, 0.0);
  }
  if (values.size() != 1 && values.size() != n)
    throw InputError(fmt::format("{}: {} values given, expected 1 or {}", what, values.size(), n));
  for (double v : values)
    if (!std::isfinite(v) || v < 0)
      throw InputError(fmt::format("{}: {} is not a finite non-negative number", what, v));
  return values.size() == n ? values : std::vector<double>(n, values.front());
}

// Shared state of one simulation: pass times indexed by (op, stage, micro-batch).
class Run {
 public:
  // `keep_sequence`: remember the order passes actually ran in (the guided executor changes it).
  Run(const PassOrder& order, const StageTimes& times, bool keep_sequence)
      : o_(order),
        t_(times),
        stages_(order.stages),
        m_(order.microbatches),
        end_(workspace()),
        keep_sequence_(keep_sequence) {
    const size_t n = 3 * static_cast<size_t>(stages_) * m_;
    end_.assign(n, kNotYet);
    if (keep_sequence_) {
      executed_.resize(order.devices);
      for (int d = 0; d < order.devices; ++d) executed_[d].reserve(order.per_device[d].size());
    }
    // Per-stage tables for the hot loop: durations by op, and the p2p delay into each stage's F
    // (from s-1) and into its B (from s+1).
    duration_.resize(3 * static_cast<size_t>(stages_));
    hop_forward_.assign(stages_, 0.0);
    hop_backward_.assign(stages_, 0.0);
    for (int s = 0; s < stages_; ++s) {
      duration_[3 * s] = t_.forward_s[s];
      duration_[3 * s + 1] = o_.split_backward
                                 ? t_.backward_input_s[s]
                                 : t_.backward_input_s[s] + t_.backward_weight_s[s];
      duration_[3 * s + 2] = t_.backward_weight_s[s];
      if (s > 0) hop_forward_[s] = hop(s - 1);
      if (s + 1 < stages_) hop_backward_[s] = hop(s);
    }
  }

  // Passes of one micro-batch sit together: a pass's dependencies are a few entries away.
  size_t id(Op op, int stage, int mb) const {
    return (static_cast<size_t>(mb) * 3 + static_cast<size_t>(op)) * stages_ + stage;
  }
  size_t id(const Pass& p) const { return id(p.op, p.stage, p.microbatch); }

  double duration(const Pass& p) const {
    return duration_[3 * static_cast<size_t>(p.stage) + static_cast<size_t>(p.op)];
  }

  // Delay between adjacent stages a and a+1: p2p where they sit on different devices.
  double hop(int a) const {
    return o_.device_of_stage[a] == o_.device_of_stage[a + 1] ? 0.0 : t_.p2p_s[a];
  }

  // When `p` may start, or NaN with `missing` set to the unfinished dependency. With the id layout
  // the dependencies sit at fixed offsets: F of s-1 at -1, B of s+1 at +1, F (for B) and B (for
  // W) of the same stage one op back, -stages.
  double ready(const Pass& p, size_t* missing) const {
    const size_t i = id(p);
    switch (p.op) {
      case Op::kF: {
        if (p.stage == 0) return 0.0;
        const double e = end_[i - 1];
        if (std::isnan(e)) *missing = i - 1;
        return e + hop_forward_[p.stage];
      }
      case Op::kB: {
        const double own = end_[i - stages_];
        if (std::isnan(own)) {
          *missing = i - stages_;
          return own;
        }
        if (p.stage == stages_ - 1) return own;
        const double next = end_[i + 1];
        if (std::isnan(next)) {
          *missing = i + 1;
          return next;
        }
        return std::max(own, next + hop_backward_[p.stage]);
      }
      case Op::kW: {
        const double e = end_[i - stages_];
        if (std::isnan(e)) *missing = i - stages_;
        return e;
      }
    }
    return kNotYet;
  }

  // Devices other than the pass's own whose next pass may depend on it.
  template <typename Fn>
  void for_dependent_devices(const Pass& p, Fn&& fn) const {
    if (p.op == Op::kF && p.stage + 1 < stages_) fn(o_.device_of_stage[p.stage + 1]);
    if (p.op == Op::kB && p.stage > 0) fn(o_.device_of_stage[p.stage - 1]);
  }

  double run(int device, const Pass& p, double at) {
    const size_t i = id(p);
    end_[i] = at + duration(p);
    if (keep_sequence_) executed_[device].push_back(p);
    return end_[i];
  }

  PipelineResult result(bool record) const;
  // The sequences the passes ran in (kept when keep_sequence).
  std::vector<std::vector<Pass>> take_sequences() { return std::move(executed_); }
  // result() for an order run exactly with known peaks: busy time per device follows from the
  // stage times, so only each device's first and last pass are read.
  PipelineResult summary() const;
  const std::vector<double>& end() const { return end_; }

 private:
  // Per-thread buffers reused across runs: a search times many orders of similar size.
  static std::vector<double>& workspace() {
    static thread_local std::vector<double> buffer;
    return buffer;
  }
  // Only end times are kept (half the memory traffic); a start is its end minus the duration.
  double start_of(const Pass& p) const { return end_[id(p)] - duration(p); }

  const PassOrder& o_;
  const StageTimes& t_;
  int stages_, m_;
  std::vector<double>& end_;
  bool keep_sequence_;
  std::vector<std::vector<Pass>> executed_;
  std::vector<double> duration_, hop_forward_, hop_backward_;
};

PipelineResult Run::result(bool record) const {
  if (!record && !keep_sequence_ && t_.activation_bytes.empty() && !o_.peaks.empty())
    return summary();
  PipelineResult r;
  r.variant = o_.variant;
  const int p = o_.devices;
  const Op release = o_.split_backward ? Op::kW : Op::kB;
  const bool bytes = !t_.activation_bytes.empty();
  double first = std::numeric_limits<double>::infinity(), last = 0, busy_total = 0;
  r.peak_activation.assign(p, 0);
  if (bytes) r.peak_activation_bytes.assign(p, 0.0);
  if (record) {
    size_t total = 0;
    for (const auto& seq : o_.per_device) total += seq.size();
    r.timeline.reserve(total);
  }
  for (int d = 0; d < p; ++d) {
    const auto& seq = keep_sequence_ ? executed_[d] : o_.per_device[d];
    if (seq.empty()) continue;
    double busy = 0, held_bytes = 0;
    int held = 0;
    for (const Pass& ps : seq) {
      const size_t i = id(ps);
      busy += duration(ps);
      if (ps.op == Op::kF) {
        r.peak_activation[d] = std::max(r.peak_activation[d], ++held);
        if (bytes) {
          held_bytes += t_.activation_bytes[ps.stage];
          r.peak_activation_bytes[d] = std::max(r.peak_activation_bytes[d], held_bytes);
        }
      } else if (ps.op == release) {
        --held;
        if (bytes) held_bytes -= t_.activation_bytes[ps.stage];
      }
      if (record)
        r.timeline.push_back({d, "FBW"[static_cast<int>(ps.op)], ps.microbatch,
                              o_.chunk_of_stage[ps.stage], ps.stage, start_of(ps), end_[i]});
    }
    const double d_first = start_of(seq.front()), d_last = end_[id(seq.back())];
    first = std::min(first, d_first);
    last = std::max(last, d_last);
    busy_total += busy;
    const double span = d_last - d_first;
    if (span > 0) r.max_device_bubble_rate = std::max(r.max_device_bubble_rate, 1 - busy / span);
  }
  r.makespan_s = last > first ? last - first : 0;
  if (r.makespan_s > 0) r.bubble_rate = std::max(0.0, 1 - busy_total / (p * r.makespan_s));
  return r;
}

PipelineResult Run::summary() const {
  PipelineResult r;
  r.variant = o_.variant;
  r.peak_activation = o_.peaks;
  const int p = o_.devices;
  std::vector<double> busy(p, 0.0);
  for (int s = 0; s < stages_; ++s) {
    const double per_mb = t_.forward_s[s] + t_.backward_input_s[s] + t_.backward_weight_s[s];
    busy[o_.device_of_stage[s]] += per_mb * m_;
  }
  double first = std::numeric_limits<double>::infinity(), last = 0, busy_total = 0;
  for (int d = 0; d < p; ++d) {
    const auto& seq = o_.per_device[d];
    if (seq.empty()) continue;
    const double d_first = start_of(seq.front()), d_last = end_[id(seq.back())];
    first = std::min(first, d_first);
    last = std::max(last, d_last);
    busy_total += busy[d];
    const double span = d_last - d_first;
    if (span > 0) r.max_device_bubble_rate = std::max(r.max_device_bubble_rate, 1 - busy[d] / span);
  }
  r.makespan_s = last > first ? last - first : 0;
  if (r.makespan_s > 0) r.bubble_rate = std::max(0.0, 1 - busy_total / (p * r.makespan_s));
  return r;
}

// Exact executor: a device waits on its next pass; finishing a pass wakes the devices waiting on it.
PipelineResult run_exact(const PassOrder& order, const StageTimes& times, bool record) {
  Run run(order, times, false);
  const int p = order.devices;
  constexpr size_t kNone = std::numeric_limits<size_t>::max();
  std::vector<size_t> next(p, 0), blocked_on(p, kNone);
  std::vector<double> free_at(p, 0.0);
  std::vector<int> work(p);
  for (int d = 0; d < p; ++d) work[d] = p - 1 - d;
  while (!work.empty()) {
    const int d = work.back();
    work.pop_back();
    blocked_on[d] = kNone;
    const auto& list = order.per_device[d];
    while (next[d] < list.size()) {
      const Pass& ps = list[next[d]];
      size_t missing = kNone;
      const double r = run.ready(ps, &missing);
      if (std::isnan(r)) {
        blocked_on[d] = missing;
        break;
      }
      free_at[d] = run.run(d, ps, std::max(free_at[d], r));
      ++next[d];
      const size_t done = run.id(ps);
      run.for_dependent_devices(ps, [&](int other) {
        if (blocked_on[other] == done) {
          blocked_on[other] = kNone - 1;  // queued
          work.push_back(other);
        }
      });
    }
  }
  for (int d = 0; d < p; ++d)
    if (next[d] != order.per_device[d].size())
      throw std::logic_error(fmt::format("pipeline order '{}' deadlocks on device {}",
                                         order.variant, d));
  return run.result(record);
}

// Guided executor: list scheduling in time order with the pass order as priority.
PipelineResult run_guided(const PassOrder& order, const StageTimes& times, bool record,
                          std::vector<std::vector<Pass>>* sequences = nullptr) {
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
    auto [t, d] = events.top();
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
      size_t pick = list.size();
      if (head_now) {
        pick = h;
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
      throw std::logic_error(fmt::format("pipeline order '{}' deadlocks on device {} (guided)",
                                         order.variant, d));
  PipelineResult r = run.result(record);
  if (sequences) *sequences = run.take_sequences();
  return r;
}

}  // namespace

StageTimes expand_times(const PipelineProblem& problem, int stages) {
  StageTimes t;
  const size_t n = static_cast<size_t>(stages);
  t.forward_s = expand(problem.forward_s, n, "forward time", true);
  t.backward_input_s = expand(problem.backward_input_s, n, "backward-input time", true);
  t.backward_weight_s = expand(problem.backward_weight_s, n, "backward-weight time", false);
  t.p2p_s = expand(problem.p2p_s, n > 1 ? n - 1 : 1, "p2p time", false);
  if (!problem.activation_bytes.empty())
    t.activation_bytes = expand(problem.activation_bytes, n, "activation bytes", false);
  return t;
}

PipelineResult execute(const PassOrder& order, const StageTimes& times, Executor executor,
                       bool record_timeline) {
  return executor == Executor::kExact ? run_exact(order, times, record_timeline)
                                      : run_guided(order, times, record_timeline);
}

PassOrder guided_order(const PassOrder& order, const StageTimes& times) {
  PassOrder derived = order;
  run_guided(order, times, false, &derived.per_device);
  derived.variant = order.variant + ", as the guided executor ran it";
  derived.peaks = order_peaks(derived);
  return derived;
}

}  // namespace hetplan::pipeline
