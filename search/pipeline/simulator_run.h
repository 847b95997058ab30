// Internal to the simulator: the state of one simulation, shared by the exact and the guided
// executor (simulator.cpp, guided_executor.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "search/pipeline/pass_order.h"
#include "search/pipeline/schedule.h"
#include "search/pipeline/simulator.h"

namespace hetplan::pipeline::detail {

inline constexpr double kNotYet = std::numeric_limits<double>::quiet_NaN();
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
      duration_[3 * s + 1] = o_.split_backward ? t_.backward_input_s[s]
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

// The guided executor; fills `sequences` with the order the passes ran in when given.
PipelineResult run_guided(const PassOrder& order, const StageTimes& times, bool record,
                          std::vector<std::vector<Pass>>* sequences);

}  // namespace hetplan::pipeline::detail
