// The simulated annealing over single layer ranges that both placement local searches run: the
// link-blind one (local_search.cpp) and the one that follows a sparse cluster's links
// (link_search.cpp). They differ only in their moves.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "serve/flow.h"
#include "serve/local_search.h"

namespace hetplan::serve {

// Scores placements by their exact max flow plus a small reward for every layer's capacity up to
// a reference level a little above the best flow found, a tie-breaker that lets the search cross
// plateaus of equal max flow by raising the weakest layers. `Moves` (CRTP) provides
// `bool mutate(Placement&)`: a random move applied to a copy of the current placement, false when
// the move drawn does not apply.
template <class Moves>
class PlacementAnnealer {
 public:
  // What a drawn move that does not apply costs: an evaluation of the budget (the link-blind
  // moves, which rarely fail), or nothing, retried up to kFailedPerEvaluation times per
  // evaluation (moves along links, most of which the links forbid).
  enum class FailedMove { kCountsAsEvaluation, kRetried };

  PlacementAnnealer(const ServingProblem& problem, const LocalSearchOptions& options,
                    FailedMove failed)
      : problem_(problem), options_(options), rng_(options.seed), failed_move_(failed) {
    for (int i = 0; i < problem.machines(); ++i)
      if (problem.capacity[i].max_layers > 0) usable_.push_back(i);
  }

  LocalSearchResult run(const Placement& start) {
    using Clock = std::chrono::steady_clock;
    const auto t0 = Clock::now();
    LocalSearchResult result;
    cur_ = start;
    cur_flow_ = max_flow(problem_, cur_);
    reference_ = std::max(cur_flow_, mean_coverage(cur_)) * 1.1;
    cur_score_ = score(cur_, cur_flow_);
    result.placement = cur_;
    result.max_flow_tokens_per_s = cur_flow_;
    if (usable_.empty()) return result;
    const double t_start = std::max(options_.start_temperature * std::max(cur_flow_, 1.0), 1e-6);
    const double t_end = t_start * 1e-3;
    auto last_report = t0;
    int64_t done = 0, failed = 0;
    while (done < options_.evaluations) {
      // The clock is read at every step: one evaluation takes 20 us on Helix's clusters but 0.2 s
      // on 2000 machines, where checking every 256 overran the limit by a minute.
      const auto now = Clock::now();
      if (std::chrono::duration<double>(now - t0).count() > options_.time_limit_s) break;
      if (options_.progress && now - last_report > std::chrono::seconds(1)) {
        options_.progress(done, result.max_flow_tokens_per_s);
        last_report = now;
      }
      const double progress = static_cast<double>(done) / options_.evaluations;
      const double temperature = t_start * std::pow(t_end / t_start, progress);
      Placement next = cur_;
      if (!static_cast<Moves*>(this)->mutate(next)) {
        if (failed_move_ == FailedMove::kCountsAsEvaluation)
          ++done;
        else if (++failed > kFailedPerEvaluation * options_.evaluations)
          break;
        continue;
      }
      ++done;
      const double flow = max_flow(problem_, next);
      const double s = score(next, flow);
      if (s >= cur_score_ || uniform() < std::exp((s - cur_score_) / temperature)) {
        cur_ = std::move(next);
        cur_flow_ = flow;
        cur_score_ = s;
        if (flow > result.max_flow_tokens_per_s) {
          result.placement = cur_;
          result.max_flow_tokens_per_s = flow;
          // The tie-breaker aims a little above the best flow found so far.
          reference_ = std::max(reference_, flow * 1.1);
          cur_score_ = score(cur_, cur_flow_);
        }
      }
    }
    result.evaluations = done;
    result.elapsed_s = std::chrono::duration<double>(Clock::now() - t0).count();
    return result;
  }

 protected:
  double uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }
  int below(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[below(static_cast<int>(v.size()))];
  }

  const ServingProblem& problem_;
  const LocalSearchOptions& options_;
  std::mt19937_64 rng_;
  std::vector<int> usable_;  // machines that can hold a layer
  Placement cur_;

 private:
  // Weight of the tie-breaker against the max flow itself.
  static constexpr double kSoftWeight = 0.05;
  static constexpr int64_t kFailedPerEvaluation = 50;

  double mean_coverage(const Placement& p) const {
    const auto cov = layer_coverage(problem_, p);
    double sum = 0;
    for (double c : cov) sum += c;
    return sum / cov.size();
  }

  // Max flow plus a small reward for every layer's capacity up to the reference level.
  double score(const Placement& p, double flow) const {
    double soft = 0;
    for (double c : layer_coverage(problem_, p)) soft += std::min(c, reference_);
    return flow + kSoftWeight * soft / problem_.num_layers();
  }

  FailedMove failed_move_;
  double cur_flow_ = 0;
  double cur_score_ = 0;
  double reference_ = 0;
};

}  // namespace hetplan::serve
