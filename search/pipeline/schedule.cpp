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
  const PassOrder* order;
  Executor executor;
};

// A shape's candidate orders with every (order, executor) choice, plus the orders the guided
// executor ran on the reference profiles and estimate()'s shortlist, built on first use.
struct CachedSchedule {
  Candidates candidates;
  mutable std::once_flag once;
  mutable std::vector<PassOrder> derived;
  mutable std::vector<Choice> all;        // simulate(): every order, both executors where useful
  mutable std::vector<Choice> shortlist;  // estimate(): exact-executor choices only
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

// Index of the fastest of `choices` for `times` (first on ties).
size_t fastest(const std::vector<Choice>& choices, const StageTimes& times) {
  std::optional<PipelineResult> best;
  size_t winner = 0;
  for (size_t i = 0; i < choices.size(); ++i) {
    PipelineResult r = execute(*choices[i].order, times, choices[i].executor, false);
    if (!best || better(r, *best)) {
      best = std::move(r);
      winner = i;
    }
  }
  return winner;
}

// Times the choices and keeps the fastest. When the guided executor wins, the order it ran is
// timed once more exactly (never slower) and reported, so the timeline is an order's exact run.
PipelineResult run_choices(const CachedSchedule& s, const std::vector<Choice>& choices,
                           const StageTimes& times, bool record) {
  if (!s.candidates.feasible) return infeasible(s.candidates.reason);
  if (choices.empty()) return infeasible("no pass order was built");
  const Choice win = choices.size() == 1 ? choices.front() : choices[fastest(choices, times)];
  if (win.executor == Executor::kExact) return execute(*win.order, times, Executor::kExact, record);
  return execute(guided_order(*win.order, times), times, Executor::kExact, record);
}

// Reference profiles (B/F, W/F, p2p/F) for the shortlist: equal times, the paper's typical
// ratios, long and short backward passes, with and without p2p.
constexpr double kProfiles[][3] = {{1, 1, 0},   {2, 1, 0},     {1.2, 0.8, 0},
                                   {1, 0.5, 0}, {0.5, 0.5, 0}, {1, 0.3, 0},
                                   {1, 1, 0.1}, {2, 1, 0.1},   {1.5, 1, 0.05}};

StageTimes profile_times(const double (&profile)[3], int stages) {
  PipelineProblem pr;
  pr.forward_s = {1.0};
  pr.backward_input_s = {profile[0]};
  pr.backward_weight_s = {profile[1]};
  pr.p2p_s = {profile[2]};
  return expand_times(pr, stages);
}

// For each reference profile, the order that wins it (the order the guided executor ran, where
// that wins) joins the candidates, timed exactly; estimate() times only those winners. On a
// profile, up to a common scale of the times, estimate() thus gives what simulate() gives;
// elsewhere it skips simulate()'s slower guided runs and the orders that win no profile.
void complete(const CachedSchedule& s, int stages) {
  std::vector<Choice> originals;
  for (const PassOrder& o : s.candidates.orders) {
    originals.push_back({&o, Executor::kExact});
    if (s.candidates.try_guided) originals.push_back({&o, Executor::kGuided});
  }
  s.all = originals;
  if (originals.size() <= 1) {
    s.shortlist = originals;
    return;
  }
  s.derived.reserve(std::size(kProfiles));
  for (const auto& profile : kProfiles) {
    const StageTimes times = profile_times(profile, stages);
    const Choice win = originals[fastest(originals, times)];
    if (win.executor == Executor::kGuided) s.derived.push_back(guided_order(*win.order, times));
  }
  std::vector<Choice> pool;
  for (const Choice& c : originals)
    if (c.executor == Executor::kExact) pool.push_back(c);
  for (const PassOrder& o : s.derived) {
    pool.push_back({&o, Executor::kExact});
    s.all.push_back(pool.back());
  }
  std::vector<char> kept(pool.size(), 0);
  for (const auto& profile : kProfiles) kept[fastest(pool, profile_times(profile, stages))] = 1;
  for (size_t i = 0; i < pool.size(); ++i)
    if (kept[i]) s.shortlist.push_back(pool[i]);
}

std::unique_ptr<CachedSchedule> prepare(const Shape& shape) {
  auto s = std::make_unique<CachedSchedule>();
  s->candidates = build_candidates(shape);
  return s;
}

// Prepared schedules by shape. Bounded by the passes it holds; cleared when full.
class ScheduleCache {
 public:
  std::shared_ptr<const CachedSchedule> get(const Shape& s) {
    const std::string key =
        fmt::format("{}|{}|{}|{}|{}|{}", s.info->name, s.devices, s.microbatches, s.chunks, s.limit,
                    static_cast<int>(s.interleaved));
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
  std::call_once(cached->once, [&] { complete(*cached, shape.devices * shape.chunks); });
  return run_choices(*cached, cached->all, times, problem.record_timeline);
}

PipelineResult estimate(std::string_view schedule, const PipelineProblem& problem) {
  const Shape shape = resolve_shape(schedule, problem);
  const StageTimes times = expand_times(problem, shape.devices * shape.chunks);
  if (shape.limit == 0) {
    if (shape.info->name == "gpipe")
      return gpipe_closed_form(shape.devices, shape.microbatches, times);
    if (shape.info->name == "1f1b")
      if (auto r = one_f_one_b_closed_form(shape.devices, shape.microbatches, times)) return *r;
  }
  const auto cached = cache().get(shape);
  std::call_once(cached->once, [&] { complete(*cached, shape.devices * shape.chunks); });
  return run_choices(*cached, cached->shortlist, times, false);
}

}  // namespace hetplan::pipeline
