#include "serve/local_search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

#include "serve/annealing.h"
#include "serve/baselines.h"
#include "serve/flow.h"
#include "serve/link_search.h"
#include "serve/topology.h"

namespace hetplan::serve {
namespace {

using Clock = std::chrono::steady_clock;

// Moves over single ranges that ignore links (shift, grow or shrink, relocate, join, swap,
// switch off or on, cover the weakest window).
class Annealer : public PlacementAnnealer<Annealer> {
 public:
  Annealer(const ServingProblem& problem, const LocalSearchOptions& options)
      : PlacementAnnealer(problem, options, FailedMove::kCountsAsEvaluation) {}

 private:
  friend class PlacementAnnealer<Annealer>;

  // A range of `count` layers clamped into the model and the machine's limit.
  LayerRange fit(int machine, int start, int count) const {
    const int L = problem_.num_layers();
    count = std::clamp(count, 0, problem_.capacity[machine].max_layers);
    if (count == 0) return {};
    start = std::clamp(start, 0, L - count);
    return {start, count};
  }

  // The window of `count` layers with the least capacity.
  int weakest_start(const Placement& p, int count) const {
    const auto cov = layer_coverage(problem_, p);
    int best = 0;
    double best_sum = 0;
    for (int s = 0; s + count <= problem_.num_layers(); ++s) {
      double sum = 0;
      for (int l = s; l < s + count; ++l) sum += cov[l];
      if (s == 0 || sum < best_sum) {
        best = s;
        best_sum = sum;
      }
    }
    return best;
  }

  bool mutate(Placement& p) {
    const int i = usable_[below(static_cast<int>(usable_.size()))];
    LayerRange& r = p.ranges[i];
    const LayerRange before = r;
    const int kmax = problem_.capacity[i].max_layers;
    const int move = below(100);
    if (move < 30 && !r.empty()) {  // shift
      int delta = below(4) + 1;
      if (below(2)) delta = -delta;
      r = fit(i, r.start + delta, r.count);
    } else if (move < 50 && !r.empty()) {  // grow or shrink at one end
      const int delta = below(2) ? 1 : -1;
      if (below(2))
        r = fit(i, r.start, r.count + delta);
      else
        r = fit(i, r.start - delta, r.count + delta);
    } else if (move < 65) {  // relocate with a random size
      const int count = below(kmax) + 1;
      r = fit(i, below(problem_.num_layers() - count + 1), count);
    } else if (move < 80) {  // join another machine's range
      const int j = usable_[below(static_cast<int>(usable_.size()))];
      const LayerRange& other = p.ranges[j];
      if (j == i || other.empty()) return false;
      const int count = std::min(other.count, kmax);
      r = fit(i, other.start + below(other.count - count + 1), count);
    } else if (move < 90) {  // swap with another machine
      const int j = usable_[below(static_cast<int>(usable_.size()))];
      if (j == i) return false;
      const LayerRange mine = r, theirs = p.ranges[j];
      r = theirs.empty() ? LayerRange{} : fit(i, theirs.start, theirs.count);
      p.ranges[j] = mine.empty() ? LayerRange{} : fit(j, mine.start, mine.count);
    } else if (move < 95) {  // switch off, or on at the weakest window
      if (!r.empty()) {
        r = {};
      } else {
        const int count = below(kmax) + 1;
        r = fit(i, weakest_start(p, count), count);
      }
    } else {  // cover the weakest window
      const int count = r.empty() ? below(kmax) + 1 : r.count;
      r = fit(i, weakest_start(p, count), count);
    }
    return !(r == before) || move >= 80;
  }
};

// Anneals the machines' layer counts only; each count vector is placed by water_fill(), which
// moves many ranges at once (what single-range moves cannot do on a plateau).
LocalSearchResult anneal_counts(const ServingProblem& problem, const Placement& start,
                                int64_t evaluations, const LocalSearchOptions& options,
                                Clock::time_point deadline) {
  const auto t0 = Clock::now();
  std::mt19937_64 rng(options.seed ^ 0x9e3779b97f4a7c15ULL);
  const int n = problem.machines();
  std::vector<int> counts(n), class_of(n);
  const auto classes = machine_classes(problem);
  for (size_t c = 0; c < classes.size(); ++c)
    for (int i : classes[c]) class_of[i] = static_cast<int>(c);
  for (int i = 0; i < n; ++i) counts[i] = start.ranges[i].count;
  LocalSearchResult best{start, max_flow(problem, start), 0, 0};
  double cur = max_flow(problem, water_fill(problem, counts));
  const double t_start =
      std::max(options.start_temperature * std::max(best.max_flow_tokens_per_s, 1.0), 1e-6);
  int64_t done = 0;
  for (; done < evaluations; ++done) {
    if (Clock::now() > deadline) break;
    const double temperature = t_start * std::pow(1e-3, static_cast<double>(done) / evaluations);
    std::vector<int> next = counts;
    const int i = static_cast<int>(rng() % n);
    const int kmax = problem.capacity[i].max_layers;
    if (kmax == 0) continue;
    switch (rng() % 4) {
      case 0:
        next[i] = std::clamp(next[i] + ((rng() & 1) ? 1 : -1), 0, kmax);
        break;
      case 1: {
        const int j = static_cast<int>(rng() % n);
        next[i] = std::min(counts[j], kmax);
        next[j] = std::min(counts[i], problem.capacity[j].max_layers);
        break;
      }
      case 2:
        next[i] = static_cast<int>(rng() % (kmax + 1));
        break;
      default: {  // the whole class of machine i to one count, as greedy_placement() moves
        const int k = (rng() & 1) ? std::clamp(counts[i] + ((rng() & 1) ? 1 : -1), 0, kmax)
                                  : static_cast<int>(rng() % (kmax + 1));
        for (int j : classes[class_of[i]]) next[j] = k;
      }
    }
    if (next == counts) continue;
    Placement placed = water_fill(problem, next);
    const double flow = max_flow(problem, placed);
    const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
    if (flow >= cur || u < std::exp((flow - cur) / temperature)) {
      counts = std::move(next);
      cur = flow;
      if (flow > best.max_flow_tokens_per_s) best = {std::move(placed), flow, 0, 0};
    }
  }
  best.evaluations = done;
  best.elapsed_s = std::chrono::duration<double>(Clock::now() - t0).count();
  return best;
}

}  // namespace

std::vector<double> layer_coverage(const ServingProblem& problem, const Placement& placement) {
  std::vector<double> cov(problem.num_layers(), 0.0);
  for (int i = 0; i < problem.machines(); ++i) {
    const LayerRange& r = placement.ranges[i];
    if (r.empty()) continue;
    const double c = machine_arc_capacity(problem, i, r);
    for (int l = r.start; l < r.end(); ++l) cov[l] += c;
  }
  return cov;
}

LocalSearchResult local_search(const ServingProblem& problem, const Placement& start,
                               const LocalSearchOptions& options) {
  // Water filling and the moves below ignore links: on a sparse cluster they cut every path.
  if (!fully_linked(problem.cluster)) return link_local_search(problem, start, options);
  const auto t0 = Clock::now();
  const auto deadline = t0 + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(options.time_limit_s));
  // A quarter of the budget on layer counts, the rest on single ranges from the best found.
  const int64_t count_evals = options.evaluations / 4;
  LocalSearchResult counts = anneal_counts(problem, start, count_evals, options, deadline);
  LocalSearchOptions rest = options;
  rest.evaluations = options.evaluations - counts.evaluations;
  rest.time_limit_s = std::max(0.0, options.time_limit_s - counts.elapsed_s);
  Annealer annealer(problem, rest);
  LocalSearchResult result = annealer.run(counts.placement);
  result.evaluations += counts.evaluations;
  result.elapsed_s = std::chrono::duration<double>(Clock::now() - t0).count();
  return result;
}

}  // namespace hetplan::serve
