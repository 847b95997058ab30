#include "search/partition.h"

#include <algorithm>
#include <array>
#include <deque>
#include <limits>
#include <optional>

namespace hetplan {

PartitionResult partition_layers(const PartitionInput& in) {
  const int64_t P = static_cast<int64_t>(in.time_s.size());
  PartitionResult result;
  if (P == 0) return result;
  const int64_t L = static_cast<int64_t>(in.time_s[0].size());
  if (L < P) return result;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // best[s][j]: (slowest stage, sum) over stages 0..s holding layers 0..j-1.
  std::vector<std::vector<std::pair<double, double>>> best(
      P, std::vector<std::pair<double, double>>(L + 1, {kInf, kInf}));
  std::vector<std::vector<int64_t>> cut(P, std::vector<int64_t>(L + 1, -1));
  for (int64_t s = 0; s < P; ++s) {
    const auto& t = in.time_s[s];
    // Stage s holds layers i..j-1; earlier stages hold at least s layers, later ones P-1-s.
    for (int64_t j = s + 1; j <= L - (P - 1 - s); ++j) {
      double time = 0, stat = 0, act = 0, transient = 0;
      for (int64_t i = j - 1; i >= s; --i) {
        time += t[i];
        stat += in.static_bytes[s][i];
        act += in.activation_bytes[s][i];
        transient = std::max(transient, in.transient_bytes[s][i]);
        if (stat + in.in_flight[s] * act + transient > in.limit_bytes[s]) break;  // grows with i
        std::pair<double, double> prev =
            s == 0 ? (i == 0 ? std::make_pair(0.0, 0.0) : std::make_pair(kInf, kInf))
                   : best[s - 1][i];
        if (prev.first == kInf) continue;
        const std::pair<double, double> cand = {std::max(prev.first, time), prev.second + time};
        if (cand < best[s][j]) {
          best[s][j] = cand;
          cut[s][j] = i;
        }
      }
    }
  }
  if (best[P - 1][L].first == kInf) return result;
  result.feasible = true;
  result.max_stage_s = best[P - 1][L].first;
  result.ranges.resize(P);
  int64_t j = L;
  for (int64_t s = P - 1; s >= 0; --s) {
    const int64_t i = cut[s][j];
    result.ranges[s] = {i, j - 1};
    j = i;
  }
  return result;
}

}  // namespace hetplan

namespace hetplan {
namespace {

// For bound T: reach[s][i] says whether stages s..P-1 can hold layers i..L-1, each stage under T
// and under its memory limit. A stage's window of layers [i, j) grows with j and shrinks with i,
// so two pointers find each i's longest window; prefix sums give a window's time and memory in
// O(1), a sparse table its largest transient; prefix counts of the next stage's reachable starts
// say whether any cut in the window leaves a feasible rest. O(stages x layers) per bound.
class Reach {
 public:
  explicit Reach(const PartitionInput& in)
      : in_(in), P_(in.time_s.size()), L_(in.time_s[0].size()), reach_(P_ + 1) {
    const size_t stride = L_ + 1;
    time_.assign(P_ * stride, 0);
    fixed_.assign(P_ * stride, 0);  // static + in_flight x activation, per stage
    levels_ = 1;
    while ((size_t{1} << levels_) <= L_) ++levels_;
    table_.assign(P_ * levels_ * L_, 0);
    for (size_t s = 0; s < P_; ++s) {
      for (size_t i = 0; i < L_; ++i) {
        time_[s * stride + i + 1] = time_[s * stride + i] + in.time_s[s][i];
        fixed_[s * stride + i + 1] = fixed_[s * stride + i] + in.static_bytes[s][i] +
                                     in.in_flight[s] * in.activation_bytes[s][i];
        table_[(s * levels_) * L_ + i] = in.transient_bytes[s][i];
      }
      for (size_t k = 1; k < levels_; ++k)
        for (size_t i = 0; i + (size_t{1} << k) <= L_; ++i)
          table_[(s * levels_ + k) * L_ + i] =
              std::max(table_[(s * levels_ + k - 1) * L_ + i],
                       table_[(s * levels_ + k - 1) * L_ + i + (size_t{1} << (k - 1))]);
    }
    for (auto& r : reach_) r.assign(L_ + 1, 0);
    good_.assign(L_ + 2, 0);
  }

  bool feasible(double T) {
    const size_t stride = L_ + 1;
    std::fill(reach_[P_].begin(), reach_[P_].end(), 0);
    reach_[P_][L_] = 1;  // nothing left after the last stage
    for (size_t s = P_; s-- > 0;) {
      const auto& next = reach_[s + 1];
      for (size_t k = 0; k <= L_; ++k) good_[k + 1] = good_[k] + next[k];
      auto& cur = reach_[s];
      std::fill(cur.begin(), cur.end(), 0);
      const double* t = &time_[s * stride];
      const double* f = &fixed_[s * stride];
      const double limit = in_.limit_bytes[s];
      size_t j = 0;  // one past the last layer of the window [i, j)
      for (size_t i = 0; i < L_; ++i) {
        if (j < i) j = i;
        while (j < L_ && t[j + 1] - t[i] <= T &&
               f[j + 1] - f[i] + max_transient(s, i, j + 1) <= limit)
          ++j;
        // The stage may end after any layer of [i, j): cut points i+1 .. j.
        if (j > i) cur[i] = good_[j + 1] - good_[i + 1] > 0;
      }
    }
    return reach_[0][0];
  }

  // After feasible(T): each stage takes the longest run that leaves a feasible rest.
  std::vector<std::pair<int64_t, int64_t>> cut(double T) const {
    const size_t stride = L_ + 1;
    std::vector<std::pair<int64_t, int64_t>> ranges(P_);
    size_t i = 0;
    for (size_t s = 0; s < P_; ++s) {
      const double* t = &time_[s * stride];
      const double* f = &fixed_[s * stride];
      size_t best = i;
      for (size_t j = i + 1; j <= L_; ++j) {
        if (t[j] - t[i] > T || f[j] - f[i] + max_transient(s, i, j) > in_.limit_bytes[s]) break;
        if (reach_[s + 1][j]) best = j;
      }
      ranges[s] = {static_cast<int64_t>(i), static_cast<int64_t>(best) - 1};
      i = best;
    }
    return ranges;
  }

 private:
  // Largest transient of layers [a, b) on stage s (b > a).
  double max_transient(size_t s, size_t a, size_t b) const {
    const size_t k = 63 - static_cast<size_t>(__builtin_clzll(b - a));  // floor(log2(b - a))
    const double* row = &table_[(s * levels_ + k) * L_];
    return std::max(row[a], row[b - (size_t{1} << k)]);
  }

  const PartitionInput& in_;
  size_t P_, L_, levels_ = 1;
  std::vector<double> time_, fixed_, table_;
  std::vector<std::vector<char>> reach_;
  std::vector<int64_t> good_;
};

// Relative precision of the bisection: far below any difference the cost model can resolve.
constexpr double kBisectionPrecision = 1e-4;

// The slowest stage is at least the average work on the fastest stage kind and at least the most
// expensive layer on its cheapest stage.
double lower_bound_s(const PartitionInput& in) {
  const size_t P = in.time_s.size(), L = in.time_s[0].size();
  double total = 0, widest = 0;
  for (size_t i = 0; i < L; ++i) {
    double cheapest = in.time_s[0][i];
    for (size_t s = 1; s < P; ++s) cheapest = std::min(cheapest, in.time_s[s][i]);
    total += cheapest;
    widest = std::max(widest, cheapest);
  }
  return std::max(total / static_cast<double>(P), widest);
}

}  // namespace

double slowest_stage_s(const PartitionInput& in,
                       const std::vector<std::pair<int64_t, int64_t>>& ranges) {
  double slowest = 0;
  for (size_t s = 0; s < ranges.size(); ++s) {
    double t = 0;
    for (int64_t i = ranges[s].first; i <= ranges[s].second; ++i) t += in.time_s[s][i];
    slowest = std::max(slowest, t);
  }
  return slowest;
}

PartitionResult partition_layers_greedy(const PartitionInput& in) {
  PartitionResult result;
  const int64_t P = static_cast<int64_t>(in.time_s.size());
  if (P == 0 || static_cast<int64_t>(in.time_s[0].size()) < P) return result;
  double hi = 0;
  for (const auto& row : in.time_s) {
    double total = 0;
    for (double t : row) total += t;
    hi = std::max(hi, total);
  }
  Reach reach(in);
  if (!reach.feasible(hi)) return result;  // memory makes it impossible
  double lo = lower_bound_s(in) * (1 - 1e-12);
  if (reach.feasible(lo)) hi = lo;
  while (hi - lo > kBisectionPrecision * hi) {
    const double mid = 0.5 * (lo + hi);
    if (reach.feasible(mid))
      hi = mid;
    else
      lo = mid;
  }
  reach.feasible(hi);
  result.feasible = true;
  result.ranges = reach.cut(hi);
  result.max_stage_s = slowest_stage_s(in, result.ranges);
  return result;
}

PartitionResult balance_device_loads(const PartitionInput& in,
                                     const std::vector<int64_t>& device_of_stage,
                                     const std::vector<double>& device_limit_bytes,
                                     PartitionResult start) {
  const int64_t S = static_cast<int64_t>(start.ranges.size());
  if (!start.feasible || S < 2) return start;
  const int64_t L = static_cast<int64_t>(in.time_s[0].size());
  const int64_t P = *std::max_element(device_of_stage.begin(), device_of_stage.end()) + 1;
  // Prefix sums per stage: time, and what a layer holds (weights and state, one micro-batch).
  std::vector<std::vector<double>> time(S, std::vector<double>(L + 1, 0)), held = time;
  for (int64_t j = 0; j < S; ++j)
    for (int64_t i = 0; i < L; ++i) {
      time[j][i + 1] = time[j][i] + in.time_s[j][i];
      held[j][i + 1] = held[j][i] + in.static_bytes[j][i] + in.activation_bytes[j][i];
    }
  auto& r = start.ranges;
  auto stage_time = [&](int64_t j, int64_t first, int64_t last) {
    return time[j][last + 1] - time[j][first];
  };
  auto stage_bytes = [&](int64_t j, int64_t first, int64_t last) {
    return held[j][last + 1] - held[j][first];
  };
  std::vector<double> load(P, 0), bytes(P, 0);
  for (int64_t j = 0; j < S; ++j) {
    load[device_of_stage[j]] += stage_time(j, r[j].first, r[j].second);
    bytes[device_of_stage[j]] += stage_bytes(j, r[j].first, r[j].second);
  }
  // Lexicographic: the busiest device's load, the slowest stage, the sums of squared stage times
  // and of squared loads (the spread of both).
  using Score = std::array<double, 4>;
  std::vector<double> stage_s(S);
  for (int64_t j = 0; j < S; ++j) stage_s[j] = stage_time(j, r[j].first, r[j].second);
  auto score = [&](const std::vector<double>& l, const std::vector<double>& t) {
    Score sc{0, *std::max_element(t.begin(), t.end()), 0, 0};
    for (double x : t) sc[2] += x * x;
    for (double x : l) {
      sc[0] = std::max(sc[0], x);
      sc[3] += x * x;
    }
    return sc;
  };
  auto better = [](const Score& a, const Score& b) {
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i] < b[i] * (1 - 1e-12)) return true;
      if (a[i] > b[i] * (1 + 1e-12)) return false;
    }
    return false;
  };
  const double cap = *std::max_element(stage_s.begin(), stage_s.end());
  auto current = score(load, stage_s);
  // A move passes one layer from stage j along a chain of stages to stage k: each stage in between
  // gives its end layer on and takes its neighbour's, so its window shifts by one. Moving right
  // (k > j) shifts the boundaries between j and k left by one; moving left, right by one.
  std::vector<std::pair<int64_t, int64_t>> moved;  // new ranges of stages lo..hi
  std::vector<double> trial_load, trial_bytes, trial_stage;
  auto try_move = [&](int64_t j, int64_t k) -> std::optional<Score> {
    const int64_t lo = std::min(j, k), hi = std::max(j, k);
    moved.assign(r.begin() + lo, r.begin() + hi + 1);
    for (int64_t x = lo; x < hi; ++x) {  // boundary between x and x + 1
      if (k > j) {
        --moved[x - lo].second;
        --moved[x + 1 - lo].first;
      } else {
        ++moved[x - lo].second;
        ++moved[x + 1 - lo].first;
      }
    }
    trial_load = load;
    trial_bytes = bytes;
    trial_stage = stage_s;
    for (int64_t x = lo; x <= hi; ++x) {
      const auto [f, l] = moved[x - lo];
      if (f > l) return std::nullopt;
      const double t = stage_time(x, f, l);
      // No stage may get slower than the slowest stage of the start (its fewest-bubbles split).
      if (t > cap * (1 + 1e-12)) return std::nullopt;
      const int64_t d = device_of_stage[x];
      trial_load[d] += t - stage_s[x];
      trial_stage[x] = t;
      trial_bytes[d] += stage_bytes(x, f, l) - stage_bytes(x, r[x].first, r[x].second);
    }
    if (!device_limit_bytes.empty())
      for (int64_t d = 0; d < P; ++d)
        if (trial_bytes[d] > bytes[d] && trial_bytes[d] > device_limit_bytes[d])
          return std::nullopt;
    return score(trial_load, trial_stage);
  };
  for (int64_t iteration = 0; iteration < 4 * L; ++iteration) {
    const int64_t busiest = std::max_element(load.begin(), load.end()) - load.begin();
    const double slowest = *std::max_element(stage_s.begin(), stage_s.end());
    // Candidate moves: a layer out of a stage of the busiest device, or out of the slowest stage,
    // along any chain.
    std::optional<std::pair<int64_t, int64_t>> best;
    auto best_score = current;
    for (int64_t j = 0; j < S; ++j) {
      const bool on_busiest = device_of_stage[j] == busiest;
      if ((!on_busiest && stage_s[j] < slowest) || r[j].first == r[j].second) continue;
      for (int64_t k = 0; k < S; ++k) {
        if (k == j || (on_busiest && device_of_stage[k] == busiest)) continue;
        if (const auto sc = try_move(j, k); sc && better(*sc, best_score)) {
          best_score = *sc;
          best = std::make_pair(j, k);
        }
      }
    }
    if (!best) break;
    try_move(best->first, best->second);  // the best move's ranges and sums again, to apply
    const int64_t lo = std::min(best->first, best->second);
    std::copy(moved.begin(), moved.end(), r.begin() + lo);
    load = trial_load;
    bytes = trial_bytes;
    stage_s = trial_stage;
    current = best_score;
  }
  start.max_stage_s = *std::max_element(stage_s.begin(), stage_s.end());
  return start;
}

}  // namespace hetplan

namespace hetplan {

PartitionResult refine_by_makespan(const PartitionInput& in,
                                   const std::vector<int64_t>& device_of_stage,
                                   const std::vector<double>& device_limit_bytes,
                                   PartitionResult start, const SplitMakespan& makespan,
                                   int64_t max_simulations) {
  using Ranges = std::vector<std::pair<int64_t, int64_t>>;
  const int64_t S = static_cast<int64_t>(start.ranges.size());
  if (!start.feasible || S < 2 || max_simulations < 2) return start;
  const int64_t P = *std::max_element(device_of_stage.begin(), device_of_stage.end()) + 1;
  // Device loads and bytes (static, in-flight activations, the largest transient) of a split.
  auto measure = [&](const Ranges& r, std::vector<double>& load, std::vector<double>& bytes) {
    load.assign(P, 0);
    bytes.assign(P, 0);
    std::vector<double> transient(P, 0);
    for (int64_t j = 0; j < S; ++j) {
      const int64_t d = device_of_stage[j];
      for (int64_t i = r[j].first; i <= r[j].second; ++i) {
        load[d] += in.time_s[j][i];
        bytes[d] += in.static_bytes[j][i] + in.in_flight[j] * in.activation_bytes[j][i];
        transient[d] = std::max(transient[d], in.transient_bytes[j][i]);
      }
    }
    for (int64_t d = 0; d < P; ++d) bytes[d] += transient[d];
    return *std::max_element(load.begin(), load.end());
  };
  // One layer from stage j to stage k: the stages between pass one on, so only j and k change size.
  auto moved = [&](const Ranges& r, int64_t j, int64_t k) {
    Ranges out = r;
    int64_t first = 0;
    for (int64_t x = 0; x < S; ++x) {
      const int64_t size = r[x].second - r[x].first + 1 - (x == j) + (x == k);
      out[x] = {first, first + size - 1};
      first += size;
    }
    return out;
  };
  Ranges current = start.ranges;
  std::vector<double> load, bytes, trial_load, trial_bytes;
  double cap = measure(current, load, bytes);
  double best = makespan(current);
  int64_t simulations = 1;
  for (bool improved = true; improved && simulations < max_simulations;) {
    improved = false;
    for (int64_t j = 0; j < S && !improved && simulations < max_simulations; ++j) {
      if (current[j].first == current[j].second) continue;  // every stage keeps a layer
      for (int64_t k = 0; k < S && !improved && simulations < max_simulations; ++k) {
        if (k == j) continue;
        Ranges trial = moved(current, j, k);
        if (measure(trial, trial_load, trial_bytes) > cap * (1 + 1e-12)) continue;
        bool fits = true;
        for (int64_t d = 0; d < P && !device_limit_bytes.empty(); ++d)
          fits = fits && (trial_bytes[d] <= device_limit_bytes[d] || trial_bytes[d] <= bytes[d]);
        if (!fits) continue;
        const double t = makespan(trial);
        ++simulations;
        if (t < best * (1 - 1e-12)) {
          best = t;
          current = std::move(trial);
          cap = measure(current, load, bytes);
          improved = true;
        }
      }
    }
  }
  start.ranges = std::move(current);
  start.max_stage_s = slowest_stage_s(in, start.ranges);
  return start;
}

}  // namespace hetplan
