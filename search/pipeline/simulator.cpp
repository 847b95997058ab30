#include "search/pipeline/simulator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "costmodel/errors.h"
#include "search/pipeline/simulator_run.h"

namespace hetplan::pipeline {
namespace detail {

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
  if (bytes) {
    r.peak_activation_bytes.assign(p, 0.0);
    r.activation_bytes_with_gradients.assign(p, 0.0);
  }
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
    bool gradients = false;  // a gradient pass has run on this device
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
        gradients = true;
        if (bytes) held_bytes -= t_.activation_bytes[ps.stage];
      }
      if (bytes && gradients)
        r.activation_bytes_with_gradients[d] =
            std::max(r.activation_bytes_with_gradients[d], held_bytes);
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

}  // namespace detail

namespace {

using detail::Run;

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

// Exact executor: a device waits on its next pass; finishing a pass wakes the devices waiting on
// it.
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
      throw std::logic_error(
          fmt::format("pipeline order '{}' deadlocks on device {}", order.variant, d));
  return run.result(record);
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
                                      : detail::run_guided(order, times, record_timeline, nullptr);
}

}  // namespace hetplan::pipeline
