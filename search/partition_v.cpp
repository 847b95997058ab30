// The exact layer split for V placements (v-half, v-min, v-zb): device d runs stage d and stage
// 2P-1-d, so it holds the d-th run of layers from the front and the d-th from the back, and the
// last device the two middle runs. Devices are assigned from both ends inwards: a state is the
// pair (end of the front runs, start of the back runs) after devices 0..d-1.
#include <algorithm>
#include <limits>
#include <optional>

#include "search/partition.h"

namespace hetplan {
namespace {

using Ranges = std::vector<std::pair<int64_t, int64_t>>;
constexpr double kInf = std::numeric_limits<double>::infinity();
// Relative slack on a cap: sums of the same layers taken in another order differ by rounding.
constexpr double kRounding = 1e-12;
// Relative width at which bisection hands over to the exact descent.
constexpr double kBisectionPrecision = 1e-4;

// Per stage: prefix sums of time and of held bytes (static + in-flight activations), and a sparse
// table for the largest transient of a run, so that any run [a, b) costs O(1).
class StageSums {
 public:
  explicit StageSums(const PartitionInput& in) : L_(in.time_s[0].size()) {
    const size_t S = in.time_s.size();
    while ((size_t{1} << levels_) <= L_) ++levels_;
    time_.assign(S, std::vector<double>(L_ + 1, 0));
    bytes_ = time_;
    transient_.assign(S, std::vector<std::vector<double>>(levels_));
    for (size_t s = 0; s < S; ++s) {
      for (size_t i = 0; i < L_; ++i) {
        time_[s][i + 1] = time_[s][i] + in.time_s[s][i];
        bytes_[s][i + 1] =
            bytes_[s][i] + in.static_bytes[s][i] + in.in_flight[s] * in.activation_bytes[s][i];
      }
      transient_[s][0] = in.transient_bytes[s];
      for (size_t k = 1; k < levels_; ++k) {
        const auto& prev = transient_[s][k - 1];
        auto& row = transient_[s][k];
        row.resize(L_ + 1 - (size_t{1} << k));
        for (size_t i = 0; i < row.size(); ++i)
          row[i] = std::max(prev[i], prev[i + (size_t{1} << (k - 1))]);
      }
    }
  }
  double time(size_t s, size_t a, size_t b) const { return time_[s][b] - time_[s][a]; }
  double bytes(size_t s, size_t a, size_t b) const { return bytes_[s][b] - bytes_[s][a]; }
  double transient(size_t s, size_t a, size_t b) const {  // b > a
    const size_t k = 63 - static_cast<size_t>(__builtin_clzll(b - a));
    return std::max(transient_[s][k][a], transient_[s][k][b - (size_t{1} << k)]);
  }

 private:
  size_t L_, levels_ = 1;
  std::vector<std::vector<double>> time_, bytes_;
  std::vector<std::vector<std::vector<double>>> transient_;
};

// One sweep from the outer devices inwards over the states that a cap on every device's time and
// memory allow. It finds a split within the cap, or with `least_squares` the one with the least
// sum of squared
// stage times. Only reachable states are stored (per device a list, indexed by a dense map that
// is cleared after use), so a sweep with tight caps touches few states.
class NestedSweep {
 public:
  NestedSweep(const PartitionInput& in, const std::vector<double>& device_limit_bytes)
      : sums_(in),
        limit_(device_limit_bytes),
        P_(in.time_s.size() / 2),
        L_(in.time_s[0].size()),
        where_((L_ + 1) * (L_ + 1), -1),
        levels_(P_),
        cheapest_s_(L_ + 1, 0),
        least_bytes_(L_ + 1, 0),
        inner_limit_(P_ + 1, 0),
        inner_speed_(P_ + 1, 0) {
    for (size_t i = 0; i < L_; ++i) {
      double time = kInf, bytes = kInf;
      for (size_t s = 0; s < 2 * P_; ++s) {
        time = std::min(time, in.time_s[s][i]);
        bytes =
            std::min(bytes, in.static_bytes[s][i] + in.in_flight[s] * in.activation_bytes[s][i]);
      }
      cheapest_s_[i + 1] = cheapest_s_[i] + time;
      least_bytes_[i + 1] = least_bytes_[i] + bytes;
    }
    for (size_t d = P_; d-- > 0 && !limit_.empty();)
      inner_limit_[d] = inner_limit_[d + 1] + limit_[d];
    // inner_speed_[d]: how much cheapest-stage time devices d..P-1 run per second of their own.
    for (size_t d = P_; d-- > 0;) {
      double slowdown = kInf;
      for (size_t s : {d, 2 * P_ - 1 - d})
        for (size_t i = 0; i < L_; ++i) {
          const double cheapest = cheapest_s_[i + 1] - cheapest_s_[i];
          if (cheapest > 0) slowdown = std::min(slowdown, in.time_s[s][i] / cheapest);
        }
      inner_speed_[d] = inner_speed_[d + 1] + (slowdown < kInf ? 1 / slowdown : 1);
    }
  }

  // No split's busiest device runs less than the cheapest time of all layers over the speeds.
  double device_lower_bound() const { return cheapest_s_[L_] / inner_speed_[0]; }

  std::optional<Ranges> run(double cap_s, bool least_squares) {
    cap_s *= 1 + kRounding;
    for (auto& level : levels_) level.clear();
    levels_[0].push_back({0, static_cast<int64_t>(L_), 0, -1});
    for (size_t d = 0; d + 1 < P_; ++d) {
      expand(d, cap_s, least_squares);
      for (const State& s : levels_[d + 1]) where_[s.i * (L_ + 1) + s.j] = -1;
      if (levels_[d + 1].empty()) return std::nullopt;
    }
    return finish(cap_s);
  }

 private:
  struct State {
    int64_t i, j;    // front runs end before layer i, back runs start at layer j
    double value;    // sum of squared stage times so far
    int64_t parent;  // index in the previous device's list
  };

  // The middle device's runs [i, k) and [k, j).
  bool fits(size_t d, size_t i, size_t k, size_t j) const {
    if (limit_.empty()) return true;
    const size_t a = d, b = d + 1;
    const double bytes = sums_.bytes(a, i, k) + sums_.bytes(b, k, j);
    return bytes + std::max(sums_.transient(a, i, k), sums_.transient(b, k, j)) <= limit_[d];
  }

  // The last end j2 for which the inner layers [i2, j2) could still go to devices d+1..P-1: their
  // least time within what those devices can run under the caps (device e runs every layer at
  // least speed_e times slower than the cheapest stage), their least bytes within their memory.
  // Both grow with j2; without this bound a sweep would visit every pair (i2, j2).
  int64_t inner_end(size_t d, int64_t i2, double cap_s) const {
    const double time_cap = inner_speed_[d + 1] * cap_s * (1 + 1e-9);
    const double bytes_cap = limit_.empty() ? kInf : inner_limit_[d + 1];
    int64_t lo = i2, hi = static_cast<int64_t>(L_);  // [i2, lo) fits; find the last that does
    while (lo < hi) {
      const int64_t mid = (lo + hi + 1) / 2;
      if (cheapest_s_[mid] - cheapest_s_[i2] <= time_cap &&
          least_bytes_[mid] - least_bytes_[i2] <= bytes_cap)
        lo = mid;
      else
        hi = mid - 1;
    }
    return lo;
  }

  // Device d (not the middle one) takes a front run [i, i2) and a back run [j2, j).
  void expand(size_t d, double cap_s, bool least_squares) {
    const size_t a = d, b = 2 * P_ - 1 - d;
    const double limit = limit_.empty() ? kInf : limit_[d];
    const int64_t room = 2 * static_cast<int64_t>(P_ - 1 - d);  // stages still to place inside
    auto& next = levels_[d + 1];
    const auto& states = levels_[d];
    for (size_t p = 0; p < states.size(); ++p) {
      const auto [i, j, value, parent] = states[p];
      for (int64_t i2 = i + 1; j - i2 >= room + 1; ++i2) {
        const double ta = sums_.time(a, i, i2);
        const double bytes_a = limit_.empty() ? 0 : sums_.bytes(a, i, i2);
        const double transient_a = limit_.empty() ? 0 : sums_.transient(a, i, i2);
        if (ta > cap_s || bytes_a + transient_a > limit) break;
        for (int64_t j2 = std::min(j - 1, inner_end(d, i2, cap_s)); j2 - i2 >= room; --j2) {
          const double tb = sums_.time(b, j2, j);
          if (ta + tb > cap_s) break;
          if (!limit_.empty() &&
              bytes_a + sums_.bytes(b, j2, j) + std::max(transient_a, sums_.transient(b, j2, j)) >
                  limit)
            break;
          const double v = least_squares ? value + ta * ta + tb * tb : 0;
          int64_t& at = where_[i2 * (L_ + 1) + j2];
          if (at < 0) {
            at = static_cast<int64_t>(next.size());
            next.push_back({i2, j2, v, static_cast<int64_t>(p)});
          } else if (v < next[at].value) {
            next[at].value = v;
            next[at].parent = static_cast<int64_t>(p);
          }
        }
      }
    }
  }

  // The middle device takes [i, k) and [k, j); the best final state gives the split.
  std::optional<Ranges> finish(double cap_s) {
    const size_t d = P_ - 1, a = d, b = d + 1;
    double best = kInf;
    int64_t best_p = -1, best_k = -1;
    const auto& states = levels_[d];
    for (size_t p = 0; p < states.size(); ++p) {
      const auto [i, j, value, parent] = states[p];
      for (int64_t k = i + 1; k < j; ++k) {
        const double ta = sums_.time(a, i, k), tb = sums_.time(b, k, j);
        if (ta > cap_s) break;
        if (ta + tb > cap_s || !fits(d, i, k, j)) continue;
        const double v = value + ta * ta + tb * tb;
        if (v < best) {
          best = v;
          best_p = static_cast<int64_t>(p);
          best_k = k;
        }
      }
    }
    if (best_p < 0) return std::nullopt;
    Ranges ranges(2 * P_);
    ranges[d] = {states[best_p].i, best_k - 1};
    ranges[d + 1] = {best_k, states[best_p].j - 1};
    int64_t p = best_p;
    for (size_t e = d; e-- > 0;) {
      const State& inner = levels_[e + 1][p];
      const State& outer = levels_[e][inner.parent];
      ranges[e] = {outer.i, inner.i - 1};
      ranges[2 * P_ - 1 - e] = {inner.j, outer.j - 1};
      p = inner.parent;
    }
    return ranges;
  }

  StageSums sums_;
  const std::vector<double>& limit_;
  size_t P_, L_;
  std::vector<int64_t> where_;              // state -> index in the list being built, -1 if none
  std::vector<std::vector<State>> levels_;  // reachable states before each device
  // Prefix sums of each layer's least time and bytes over the stages; memory of devices d..P-1.
  std::vector<double> cheapest_s_, least_bytes_, inner_limit_, inner_speed_;
};

double device_max(const PartitionInput& in, const Ranges& ranges) {
  const size_t S = ranges.size(), P = S / 2;
  std::vector<double> device(P, 0);
  for (size_t s = 0; s < S; ++s)
    for (int64_t i = ranges[s].first; i <= ranges[s].second; ++i)
      device[s < P ? s : S - 1 - s] += in.time_s[s][i];
  return *std::max_element(device.begin(), device.end());
}

// Whether every device's two runs fit its memory (as NestedSweep::fits counts it).
bool fits(const PartitionInput& in, const std::vector<double>& limit, const Ranges& r) {
  if (limit.empty()) return true;
  const size_t S = r.size(), P = S / 2;
  std::vector<double> bytes(P, 0), transient(P, 0);
  for (size_t s = 0; s < S; ++s) {
    const size_t d = s < P ? s : S - 1 - s;
    for (int64_t i = r[s].first; i <= r[s].second; ++i) {
      bytes[d] += in.static_bytes[s][i] + in.in_flight[s] * in.activation_bytes[s][i];
      transient[d] = std::max(transient[d], in.transient_bytes[s][i]);
    }
  }
  for (size_t d = 0; d < P; ++d)
    if (bytes[d] + transient[d] > limit[d]) return false;
  return true;
}

}  // namespace

PartitionResult partition_v_devices(const PartitionInput& in,
                                    const std::vector<double>& device_limit_bytes,
                                    const std::vector<std::pair<int64_t, int64_t>>& hint) {
  PartitionResult result;
  const size_t S = in.time_s.size();
  if (S < 2 || S % 2 != 0 || in.time_s[0].size() < S) return result;
  const size_t L = in.time_s[0].size();
  NestedSweep sweep(in, device_limit_bytes);
  // Bounds on the busiest device: the widest layer at its cheapest, every layer at its dearest.
  // Memory: the layers' least bytes must fit the devices together.
  double widest = 0, most = 0, need = 0;
  for (size_t i = 0; i < L; ++i) {
    double cheapest = kInf, dearest = 0, least = kInf;
    for (size_t s = 0; s < S; ++s) {
      cheapest = std::min(cheapest, in.time_s[s][i]);
      dearest = std::max(dearest, in.time_s[s][i]);
      least = std::min(least, in.static_bytes[s][i] + in.in_flight[s] * in.activation_bytes[s][i]);
    }
    widest = std::max(widest, cheapest);
    most += dearest;
    need += least;
  }
  double have = 0;
  for (double limit : device_limit_bytes) have += limit;
  if (!device_limit_bytes.empty() && need > have) return result;
  // A first split: the hint when it fits, else any that fits (one sweep bounded by memory alone).
  double lo = std::max(sweep.device_lower_bound(), widest) * (1 - kRounding);
  std::optional<Ranges> first;
  if (hint.size() == S && fits(in, device_limit_bytes, hint)) first = hint;
  if (!first) first = sweep.run(most, false);
  if (!first) return result;  // memory rules out every split
  // The least cap on the busiest device: bisection to kBisectionPrecision, each feasible cap
  // lowered at once to the busiest device of the split found; then down through the values
  // splits actually take (a hair under the last one found) until none is left: exact.
  Ranges at_hi = std::move(*first);
  double hi = device_max(in, at_hi);
  while (hi - lo > kBisectionPrecision * hi) {
    const double mid = 0.5 * (lo + hi);
    if (auto r = sweep.run(mid, false)) {
      at_hi = std::move(*r);
      hi = device_max(in, at_hi);
    } else {
      lo = mid;
    }
  }
  while (auto r = sweep.run(hi * (1 - 4 * kRounding), false)) {
    at_hi = std::move(*r);
    hi = device_max(in, at_hi);
  }
  std::optional<Ranges> best = sweep.run(hi, true);
  result.feasible = true;
  result.max_device_s = hi;
  result.ranges = best ? std::move(*best) : std::move(at_hi);
  result.max_stage_s = slowest_stage_s(in, result.ranges);
  return result;
}

}  // namespace hetplan
