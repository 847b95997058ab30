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

// One way to time a schedule: a candidate order and the executor that runs it.
struct Choice {
  size_t order;
  Executor executor;
};

// A shape's candidate orders, every (order, executor) choice, and the shortlist estimate() times:
// the choices that win for at least one of a few reference time profiles.
struct CachedSchedule {
  Candidates candidates;
  std::vector<Choice> all;
  // Filled on the first estimate() of the shape (simulate() never needs it).
  mutable std::once_flag shortlist_once;
  mutable std::vector<Choice> shortlist;
};

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

// Times the given choices and keeps the fastest; records the winner's timeline when asked.
PipelineResult run_choices(const CachedSchedule& s, const std::vector<Choice>& choices,
                           const StageTimes& times, bool record) {
  if (!s.candidates.feasible) return infeasible(s.candidates.reason);
  if (choices.empty()) return infeasible("no pass order was built");
  const auto& orders = s.candidates.orders;
  if (choices.size() == 1)  // nothing to choose: time it once
    return execute(orders[choices[0].order], times, choices[0].executor, record);
  std::optional<PipelineResult> best;
  Choice winner = choices.front();
  for (const Choice& c : choices) {
    PipelineResult r = execute(orders[c.order], times, c.executor, false);
    if (!best || better(r, *best)) {
      best = std::move(r);
      winner = c;
    }
  }
  if (record) best = execute(orders[winner.order], times, winner.executor, true);
  if (winner.executor == Executor::kGuided) best->variant += ", guided";
  return *best;
}

// Reference profiles (B/F, W/F, p2p/F) for the shortlist: equal times, the paper's typical
// ratios, long and short backward passes, with and without p2p.
constexpr double kProfiles[][3] = {{1, 1, 0},    {2, 1, 0},   {1.2, 0.8, 0}, {1, 0.5, 0},
                                   {0.5, 0.5, 0}, {1, 0.3, 0}, {1, 1, 0.1},   {2, 1, 0.1},
                                   {1.5, 1, 0.05}};

// The choices that win for at least one reference profile.
std::vector<Choice> make_shortlist(const CachedSchedule& s, const Shape& shape) {
  if (s.all.size() <= 1) return s.all;
  std::vector<char> kept(s.all.size(), 0);
  const int stages = shape.devices * shape.chunks;
  for (const auto& profile : kProfiles) {
    PipelineProblem pr;
    pr.forward_s = {1.0};
    pr.backward_input_s = {profile[0]};
    pr.backward_weight_s = {profile[1]};
    pr.p2p_s = {profile[2]};
    const StageTimes times = expand_times(pr, stages);
    std::optional<PipelineResult> best;
    size_t winner = 0;
    for (size_t i = 0; i < s.all.size(); ++i) {
      PipelineResult r =
          execute(s.candidates.orders[s.all[i].order], times, s.all[i].executor, false);
      if (!best || better(r, *best)) {
        best = std::move(r);
        winner = i;
      }
    }
    kept[winner] = 1;
  }
  std::vector<Choice> shortlist;
  for (size_t i = 0; i < s.all.size(); ++i)
    if (kept[i]) shortlist.push_back(s.all[i]);
  return shortlist;
}

std::unique_ptr<CachedSchedule> prepare(const Shape& shape) {
  auto s = std::make_unique<CachedSchedule>();
  s->candidates = build_candidates(shape);
  for (size_t i = 0; i < s->candidates.orders.size(); ++i) {
    s->all.push_back({i, Executor::kExact});
    if (s->candidates.try_guided) s->all.push_back({i, Executor::kGuided});
  }
  return s;
}

// Prepared schedules by shape. Bounded by the passes it holds; cleared when full.
class ScheduleCache {
 public:
  std::shared_ptr<const CachedSchedule> get(const Shape& s) {
    const std::string key = fmt::format("{}|{}|{}|{}|{}", s.info->name, s.devices, s.microbatches,
                                        s.chunks, s.limit);
    {
      std::lock_guard lock(mutex_);
      if (auto it = entries_.find(key); it != entries_.end()) return it->second;
    }
    std::shared_ptr<const CachedSchedule> built = prepare(s);
    size_t passes = 0;
    for (const PassOrder& o : built->candidates.orders)
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
  std::unordered_map<std::string, std::shared_ptr<const CachedSchedule>> entries_;
  size_t passes_ = 0;
};

ScheduleCache& cache() {
  static ScheduleCache instance;
  return instance;
}

}  // namespace

int minimum_activation_limit(std::string_view schedule, const PipelineProblem& problem) {
  return minimum_limit(resolve_shape(schedule, problem));
}

PipelineResult simulate(std::string_view schedule, const PipelineProblem& problem) {
  const Shape shape = resolve_shape(schedule, problem);
  const StageTimes times = expand_times(problem, shape.devices * shape.chunks);
  const auto cached = cache().get(shape);
  return run_choices(*cached, cached->all, times, problem.record_timeline);
}

PipelineResult estimate(std::string_view schedule, const PipelineProblem& problem) {
  const Shape shape = resolve_shape(schedule, problem);
  const StageTimes times = expand_times(problem, shape.devices * shape.chunks);
  if (shape.limit == 0) {
    if (shape.info->name == "gpipe") return gpipe_closed_form(shape.devices, shape.microbatches, times);
    if (shape.info->name == "1f1b")
      if (auto r = one_f_one_b_closed_form(shape.devices, shape.microbatches, times)) return *r;
  }
  const auto cached = cache().get(shape);
  std::call_once(cached->shortlist_once,
                 [&] { cached->shortlist = make_shortlist(*cached, shape); });
  return run_choices(*cached, cached->shortlist, times, false);
}

}  // namespace hetplan::pipeline
