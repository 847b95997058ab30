#include "search/pipeline/schedule.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>

#include "search/pipeline/candidates.h"
#include "search/pipeline/closed_forms.h"
#include "search/pipeline/simulator.h"

namespace hetplan::pipeline {
namespace {

// Candidate orders by shape. Bounded by the passes it holds; cleared when full.
class OrderCache {
 public:
  std::shared_ptr<const Candidates> get(const Shape& s) {
    const std::string key = fmt::format("{}|{}|{}|{}|{}", s.info->name, s.devices, s.microbatches,
                                        s.chunks, s.limit);
    {
      std::lock_guard lock(mutex_);
      if (auto it = entries_.find(key); it != entries_.end()) return it->second;
    }
    auto built = std::make_shared<const Candidates>(build_candidates(s));
    size_t passes = 0;
    for (const PassOrder& o : built->orders)
      for (const auto& seq : o.per_device) passes += seq.size();
    std::lock_guard lock(mutex_);
    if (passes_ + passes > kMaxPasses) {
      entries_.clear();
      passes_ = 0;
    }
    if (entries_.emplace(key, built).second) passes_ += passes;
    return built;
  }

 private:
  static constexpr size_t kMaxPasses = size_t{1} << 25;  // about 400 MB of orders
  std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<const Candidates>> entries_;
  size_t passes_ = 0;
};

OrderCache& cache() {
  static OrderCache instance;
  return instance;
}

bool better(const PipelineResult& a, const PipelineResult& b) {
  const double tolerance = 1e-12 * std::max(1.0, b.makespan_s);
  if (a.makespan_s < b.makespan_s - tolerance) return true;
  if (a.makespan_s > b.makespan_s + tolerance) return false;
  const auto peak = [](const PipelineResult& r) {
    return r.peak_activation.empty()
               ? 0
               : *std::max_element(r.peak_activation.begin(), r.peak_activation.end());
  };
  return peak(a) < peak(b);
}

PipelineResult infeasible(const std::string& reason) {
  PipelineResult r;
  r.feasible = false;
  r.reason = reason;
  return r;
}

// Times every candidate order (exactly, and guided where the backward is split) and keeps the
// fastest; records the winner's timeline when asked.
PipelineResult run_candidates(const Candidates& c, const StageTimes& times, bool record) {
  if (!c.feasible) return infeasible(c.reason);
  std::optional<PipelineResult> best;
  const PassOrder* best_order = nullptr;
  Executor best_executor = Executor::kExact;
  for (const PassOrder& order : c.orders) {
    for (Executor ex : {Executor::kExact, Executor::kGuided}) {
      if (ex == Executor::kGuided && !c.try_guided) continue;
      PipelineResult r = execute(order, times, ex, false);
      if (!best || better(r, *best)) {
        best = std::move(r);
        best_order = &order;
        best_executor = ex;
      }
    }
  }
  if (!best) return infeasible("no pass order was built");
  if (record) best = execute(*best_order, times, best_executor, true);
  if (best_executor == Executor::kGuided) best->variant += ", guided";
  return *best;
}

}  // namespace

int minimum_activation_limit(std::string_view schedule, const PipelineProblem& problem) {
  return minimum_limit(resolve_shape(schedule, problem));
}

PipelineResult simulate(std::string_view schedule, const PipelineProblem& problem) {
  const Shape shape = resolve_shape(schedule, problem);
  const StageTimes times = expand_times(problem, shape.devices * shape.chunks);
  return run_candidates(*cache().get(shape), times, problem.record_timeline);
}

PipelineResult estimate(std::string_view schedule, const PipelineProblem& problem) {
  const Shape shape = resolve_shape(schedule, problem);
  const StageTimes times = expand_times(problem, shape.devices * shape.chunks);
  if (shape.limit == 0) {
    if (shape.info->name == "gpipe") return gpipe_closed_form(shape.devices, shape.microbatches, times);
    if (shape.info->name == "1f1b")
      if (auto r = one_f_one_b_closed_form(shape.devices, shape.microbatches, times)) return *r;
  }
  return run_candidates(*cache().get(shape), times, false);
}

}  // namespace hetplan::pipeline
