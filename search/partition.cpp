#include "search/partition.h"

#include <algorithm>
#include <limits>

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
        std::pair<double, double> prev = s == 0 ? (i == 0 ? std::make_pair(0.0, 0.0)
                                                          : std::make_pair(kInf, kInf))
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
