#include "serve/baselines.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <tuple>

#include "serve/flow.h"

namespace hetplan::serve {
namespace {

// The window [s, s + k) whose capacities, sorted ascending, are lexicographically smallest.
int weakest_window(const std::vector<double>& coverage, int k) {
  const int L = static_cast<int>(coverage.size());
  int best = 0;
  std::vector<double> best_sorted, cur;
  for (int s = 0; s + k <= L; ++s) {
    cur.assign(coverage.begin() + s, coverage.begin() + s + k);
    std::sort(cur.begin(), cur.end());
    if (s == 0 || cur < best_sorted) {
      best = s;
      best_sorted = cur;
    }
  }
  return best;
}

double capacity_at(const ServingProblem& problem, int machine, int k) {
  const auto& cap = problem.capacity[machine];
  return k >= 1 && k <= cap.max_layers ? cap.tokens_per_s[k] : 0.0;
}

}  // namespace

std::vector<std::vector<int>> machine_classes(const ServingProblem& problem) {
  std::map<std::tuple<std::string, double, double, double>, int> index;
  std::vector<std::vector<int>> classes;
  for (int i = 0; i < problem.machines(); ++i) {
    const Machine& m = problem.cluster.machines()[i];
    const auto key = std::make_tuple(m.machine_type, m.vram_bytes, m.nic_in_GBps, m.nic_out_GBps);
    auto [it, fresh] = index.emplace(key, static_cast<int>(classes.size()));
    if (fresh) classes.emplace_back();
    classes[it->second].push_back(i);
  }
  return classes;
}

Placement petals_placement(const ServingProblem& problem, uint64_t seed) {
  const int n = problem.machines();
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  // Fisher-Yates on the raw engine output: the same order on every standard library.
  std::mt19937_64 rng(seed);
  for (int i = n - 1; i > 0; --i) std::swap(order[i], order[rng() % (i + 1)]);
  std::vector<double> coverage(problem.num_layers(), 0.0);
  Placement p;
  p.ranges.assign(n, LayerRange{});
  for (int i : order) {
    const int k = problem.capacity[i].max_layers;
    if (k == 0) continue;
    const int s = weakest_window(coverage, k);
    p.ranges[i] = {s, k};
    for (int l = s; l < s + k; ++l) coverage[l] += capacity_at(problem, i, k);
  }
  return p;
}

Placement swarm_placement(const ServingProblem& problem) {
  const int L = problem.num_layers();
  int fit = L;
  for (const auto& cap : problem.capacity)
    if (cap.max_layers > 0) fit = std::min(fit, cap.max_layers);
  int stage = fit;
  while (stage > 1 && L % stage != 0) --stage;
  const int stages = L / stage;
  std::vector<int> order;
  for (int i = 0; i < problem.machines(); ++i)
    if (problem.capacity[i].max_layers >= stage) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return capacity_at(problem, a, stage) > capacity_at(problem, b, stage);
  });
  std::vector<double> total(stages, 0.0);
  Placement p;
  p.ranges.assign(problem.machines(), LayerRange{});
  for (int i : order) {
    const int s = static_cast<int>(std::min_element(total.begin(), total.end()) - total.begin());
    p.ranges[i] = {s * stage, stage};
    total[s] += capacity_at(problem, i, stage);
  }
  return p;
}

Placement homogeneous_placement(const ServingProblem& problem) {
  const int L = problem.num_layers();
  Placement p;
  p.ranges.assign(problem.machines(), LayerRange{});
  std::map<std::string, std::vector<int>> by_type;
  for (int i = 0; i < problem.machines(); ++i)
    by_type[problem.cluster.machines()[i].machine_type].push_back(i);
  for (const auto& [type, members] : by_type) {
    int k = L;
    for (int i : members) k = std::min(k, problem.capacity[i].max_layers);
    if (k == 0) continue;
    const int depth = (L + k - 1) / k;
    const int pipelines = static_cast<int>(members.size()) / depth;
    for (int q = 0; q < pipelines; ++q) {
      int start = 0;
      for (int s = 0; s < depth; ++s) {
        const int count = L / depth + (s < L % depth ? 1 : 0);
        p.ranges[members[q * depth + s]] = {start, count};
        start += count;
      }
    }
  }
  return p;
}

Placement water_fill(const ServingProblem& problem, const std::vector<int>& layers) {
  const int n = problem.machines();
  std::vector<int> order;
  for (int i = 0; i < n; ++i)
    if (layers[i] > 0) order.push_back(i);
  // Largest contribution of layer-throughput first, as in first-fit-decreasing packing.
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return layers[a] * capacity_at(problem, a, layers[a]) >
           layers[b] * capacity_at(problem, b, layers[b]);
  });
  std::vector<double> coverage(problem.num_layers(), 0.0);
  Placement p;
  p.ranges.assign(n, LayerRange{});
  for (int i : order) {
    const int k = std::min(layers[i], problem.num_layers());
    const int s = weakest_window(coverage, k);
    p.ranges[i] = {s, k};
    for (int l = s; l < s + k; ++l) coverage[l] += capacity_at(problem, i, k);
  }
  return p;
}

Placement greedy_placement(const ServingProblem& problem,
                           std::chrono::steady_clock::time_point deadline) {
  const auto classes = machine_classes(problem);
  std::vector<int> layers(problem.machines(), 0);
  for (int i = 0; i < problem.machines(); ++i) layers[i] = problem.capacity[i].max_layers;
  Placement best = water_fill(problem, layers);
  double best_flow = max_flow(problem, best);
  for (int sweep = 0; sweep < 6; ++sweep) {
    bool improved = false;
    for (const auto& members : classes) {
      const int kmax = problem.capacity[members.front()].max_layers;
      const int current = layers[members.front()];
      for (int k = 0; k <= kmax; ++k) {
        if (k == current) continue;
        if (std::chrono::steady_clock::now() > deadline) return best;
        std::vector<int> trial = layers;
        for (int i : members) trial[i] = k;
        Placement p = water_fill(problem, trial);
        const double f = max_flow(problem, p);
        if (f > best_flow * (1 + 1e-9)) {
          best_flow = f;
          best = std::move(p);
          layers = std::move(trial);
          improved = true;
        }
      }
    }
    if (!improved) break;
  }
  return best;
}

}  // namespace hetplan::serve
