#include "serve/planner.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <system_error>
#include <thread>

#include <fmt/format.h>

#include "serve/baselines.h"
#include "serve/local_search.h"
#include "serve/topology.h"

namespace hetplan::serve {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Least time the MILP phase is started with (its LPs before branch and bound).
constexpr double kMinMilpSeconds = 0.5;
// Least time for the MILP's LP bound over all layer counts: 0.9 s on cluster42 (building the
// model included), and Clp reads the clock seldom.
constexpr double kMinBoundSeconds = 1.5;
// Time for the link-aware LP bound: 20% of the time limit, or up to 1.5 s within half of it
// (0.1 s on cluster42, 0.6 s on 3cluster24.ini, up to 1 s on Helix's sparse 42-machine files;
// docs/benchmarks.md). It takes only what it needs; the rest goes to the search.
double link_bound_seconds(double time_limit_s) {
  return std::max(0.2 * time_limit_s, std::min(1.5, 0.5 * time_limit_s));
}

}  // namespace

EvaluatedPlacement evaluate_placement(const ServingProblem& problem, std::string name,
                                      Placement placement) {
  EvaluatedPlacement e;
  e.name = std::move(name);
  e.errors = placement_errors(problem, placement);
  e.flow = solve_flow(problem, placement);
  if (!(e.flow.max_flow_tokens_per_s > 0)) {
    // What the cluster lacks comes first; else what this placement lacks.
    e.no_flow_reason = why_nothing_serves(problem);
    if (e.no_flow_reason.empty()) e.no_flow_reason = why_no_flow(problem, placement);
  }
  e.placement = std::move(placement);
  return e;
}

std::vector<EvaluatedPlacement> evaluate_baselines(const ServingProblem& problem, uint64_t seed) {
  std::vector<EvaluatedPlacement> out;
  out.push_back(evaluate_placement(problem, "petals", petals_placement(problem, seed)));
  out.push_back(evaluate_placement(problem, "swarm", swarm_placement(problem)));
  out.push_back(evaluate_placement(problem, "homogeneous", homogeneous_placement(problem)));
  return out;
}

PlanResult plan_serving(const ServingProblem& problem, const PlannerOptions& options) {
  const auto t0 = Clock::now();
  PlanResult result;
  auto say = [&](const std::string& line) {
    if (options.progress) options.progress(fmt::format("[{:6.1f} s] {}", seconds_since(t0), line));
  };
  result.helix_bound_tokens_per_s = flow_upper_bound(problem);
  // The link-aware bound first: it is cheap, and the user sees it whatever the search finds.
  if (const auto bound =
          link_upper_bound(problem, {.time_limit_s = link_bound_seconds(options.time_limit_s)})) {
    result.link_upper_bound_tokens_per_s = bound->tokens_per_s;
    result.link_bound_elapsed_s = bound->elapsed_s;
    say(fmt::format("link-aware upper bound {:.1f} tokens/s ({:.3f} s)", bound->tokens_per_s,
                    bound->elapsed_s));
  } else {
    say("link-aware upper bound not solved in its share of the time limit (raise --time-limit)");
  }

  Placement best;
  best.ranges.assign(problem.machines(), LayerRange{});  // all idle until a valid one is found
  double best_flow = -1;
  auto consider = [&](const std::string& name, const Placement& p, double flow, double elapsed,
                      int64_t evaluations) {
    result.phases.push_back({name, flow, elapsed, evaluations});
    say(fmt::format("{:<22} {:10.1f} tokens/s", name, flow));
    if (flow > best_flow * (1 + 1e-9) && placement_errors(problem, p).empty()) {
      best_flow = flow;
      best = p;
      result.method = name;
    }
  };

  // Every phase stops at or skips past its share of the time limit; a phase that has no time
  // left says so. `left(share)`: seconds until share x the limit.
  auto left = [&](double share) { return options.time_limit_s * share - seconds_since(t0); };
  auto at = [&](double share) {
    return t0 + std::chrono::duration_cast<Clock::duration>(
                    std::chrono::duration<double>(options.time_limit_s * share));
  };

  // Starts: the baselines and the greedy placement; on a cluster whose links do not join every
  // pair of machines, also pipelines along the links (the others ignore links).
  const bool linked = fully_linked(problem.cluster);
  std::vector<Placement> starts = {greedy_placement(problem, at(0.25)),
                                   petals_placement(problem, options.seed),
                                   swarm_placement(problem)};
  std::vector<std::string> start_names = {"greedy", "petals", "swarm"};
  if (!linked) {
    starts.push_back(chain_placement(problem, at(0.4)));
    start_names.push_back("chains");
  }
  std::vector<double> start_flows;
  for (size_t i = 0; i < starts.size(); ++i) {
    start_flows.push_back(max_flow(problem, starts[i]));
    consider(start_names[i], starts[i], start_flows[i], seconds_since(t0), 1);
  }

  // The MILP ignores links: on a cluster where not every pair of machines is linked its
  // placements rarely serve anything, and its time is better left to the local search.
  const bool milp_fits = options.time_limit_s * 0.3 >= kMinMilpSeconds;
  const bool milp = options.use_milp && linked && milp_fits;
  if (options.use_milp && !linked)
    say("MILP skipped: it ignores links, and this cluster does not link every pair of machines");
  else if (options.use_milp && !milp_fits)
    say(
        fmt::format("MILP skipped: its 30% of the time limit is less than the {:g} s it needs "
                    "(raise --time-limit)",
                    kMinMilpSeconds));

  // Two local searches, from the greedy start and from the Petals placement (or from the chains
  // where they serve more; on a sparse cluster local_search() moves only along links); in
  // parallel when there are threads for it. Each has its own seed, so the results do not depend
  // on timing.
  const double search_share = milp ? 0.45 : 0.9;
  LocalSearchOptions ls;
  ls.evaluations = options.local_search_evaluations;
  size_t search_starts[] = {0, 1};
  if (starts.size() > 3)
    for (size_t& k : search_starts)
      if (start_flows[3] > start_flows[k]) k = 3;
  LocalSearchResult searched[2];
  auto run = [&](int k) {
    LocalSearchOptions mine = ls;
    mine.seed = options.seed * 2 + k;
    if (k == 0 && options.progress)
      mine.progress = [&](int64_t evals, double flow) {
        say(fmt::format("local search: {} evaluations, best {:.1f} tokens/s", evals, flow));
      };
    searched[k] = local_search(problem, starts[search_starts[k]], mine);
  };
  if (left(search_share) <= 0) {
    say(fmt::format("local search skipped: the starts took {:.1f} s of the {:g} s limit",
                    seconds_since(t0), options.time_limit_s));
  } else {
    ls.time_limit_s = left(search_share);
    // The second search on a thread of its own where one is allowed and the system starts it.
    // An exception in either is rethrown once both are done: a joinable thread left behind would
    // end the process in std::terminate.
    std::thread second;
    std::exception_ptr second_failed;
    if (options.threads >= 2) {
      try {
        second = std::thread([&] {
          try {
            run(1);
          } catch (...) {
            second_failed = std::current_exception();
          }
        });
      } catch (const std::system_error&) {
        // Refused (a low process limit): both searches run on this thread, below.
      }
    }
    if (second.joinable()) {
      std::exception_ptr first_failed;
      try {
        run(0);
      } catch (...) {
        first_failed = std::current_exception();
      }
      second.join();
      if (first_failed) std::rethrow_exception(first_failed);
      if (second_failed) std::rethrow_exception(second_failed);
    } else {
      ls.time_limit_s /= 2;
      run(0);
      ls.time_limit_s = std::max(0.0, left(search_share));
      run(1);
    }
    for (int k = 0; k < 2; ++k)
      consider(fmt::format("local search ({}{})", start_names[search_starts[k]],
                           search_starts[0] == search_starts[1] ? fmt::format(" {}", k + 1) : ""),
               searched[k].placement, searched[k].max_flow_tokens_per_s, searched[k].elapsed_s,
               searched[k].evaluations);
  }

  if (milp) {
    // The MILP rarely beats the local search on its own (docs/serving.md): at most 30% of the
    // time, its LP bound over all layer counts first when there is time for that too.
    const double budget = std::max(0.0, std::min(options.time_limit_s * 0.3, left(0.85)));
    const double phase_start = seconds_since(t0);
    if (budget >= kMinBoundSeconds)
      result.milp_upper_bound_tokens_per_s = milp_upper_bound(problem, 0.5 * budget);
    MilpOptions mo;
    mo.threads = options.threads;
    mo.seed = options.seed;
    mo.max_nodes = options.milp_nodes;
    mo.layer_count_window = options.milp_layer_count_window;
    mo.time_limit_s =
        std::max(0.0, std::min(budget - (seconds_since(t0) - phase_start), left(0.85)));
    // Its LPs before branch and bound take 0.1-0.3 s on Helix's clusters: below that it cannot
    // even return its warm start.
    if (mo.time_limit_s < kMinMilpSeconds) {
      say(fmt::format("MILP skipped: {:.2f} s left for it, it needs {:g} s (raise --time-limit)",
                      mo.time_limit_s, kMinMilpSeconds));
    } else {
      say(fmt::format("MILP (CBC, {} thread{}, {:.1f} s limit)", mo.threads,
                      mo.threads == 1 ? "" : "s", mo.time_limit_s));
      result.milp = solve_placement_milp(problem, {best, starts[0]}, mo);
      if (result.milp.solved) {
        const double flow = max_flow(problem, result.milp.placement);
        consider("milp", result.milp.placement, flow, result.milp.elapsed_s, result.milp.nodes);
        // A short polish of the MILP's placement when it found something new.
        if (flow > best_flow * (1 - 1e-9) && !(result.milp.placement == best) && left(0.9) > 0) {
          LocalSearchOptions polish = ls;
          polish.evaluations = options.local_search_evaluations / 5;
          polish.seed = options.seed * 2 + 7;
          polish.time_limit_s = left(0.9);
          const auto p = local_search(problem, result.milp.placement, polish);
          consider("milp + local search", p.placement, p.max_flow_tokens_per_s, p.elapsed_s,
                   p.evaluations);
        }
      }
    }
  } else if (options.use_milp && left(0.97) >= kMinBoundSeconds) {
    // No MILP on this cluster; its LP bound is still an upper bound, in what is left.
    result.milp_upper_bound_tokens_per_s = milp_upper_bound(problem, left(0.97));
  }
  if (options.use_milp && !result.milp_upper_bound_tokens_per_s)
    say(
        fmt::format("MILP LP bound not computed: it needs {:g} s of the MILP's time "
                    "(raise --time-limit)",
                    kMinBoundSeconds));

  result.best = evaluate_placement(problem, "hetplan", best);
  result.elapsed_s = seconds_since(t0);
  say(fmt::format("best: {:.1f} tokens/s by {}", best_flow, result.method));
  return result;
}

}  // namespace hetplan::serve
