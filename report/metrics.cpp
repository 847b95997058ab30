#include "report/metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "costmodel/stats.h"

namespace hetplan {

ErrorStats error_stats(const std::vector<double>& predicted, const std::vector<double>& measured) {
  ErrorStats e;
  std::vector<double> ape, signed_error;
  for (size_t i = 0; i < predicted.size() && i < measured.size(); ++i) {
    if (!(measured[i] > 0)) continue;
    const double rel = (predicted[i] - measured[i]) / measured[i];
    ape.push_back(std::fabs(rel));
    signed_error.push_back(rel);
  }
  e.count = static_cast<int64_t>(ape.size());
  if (ape.empty()) return e;
  std::sort(ape.begin(), ape.end());
  std::sort(signed_error.begin(), signed_error.end());
  e.median_ape = percentile_sorted(ape, 0.5);
  e.p90_ape = percentile_sorted(ape, 0.9);
  e.max_ape = ape.back();
  e.median_signed = percentile_sorted(signed_error, 0.5);
  return e;
}

std::vector<double> average_ranks(const std::vector<double>& v) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> ranks(v.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    const double mean_rank = (static_cast<double>(i) + static_cast<double>(j)) / 2 + 1;
    for (size_t k = i; k <= j; ++k) ranks[order[k]] = mean_rank;
    i = j + 1;
  }
  return ranks;
}

std::optional<double> spearman(const std::vector<double>& x, const std::vector<double>& y) {
  const size_t n = std::min(x.size(), y.size());
  if (n < 2) return std::nullopt;
  const std::vector<double> rx = average_ranks({x.begin(), x.begin() + n});
  const std::vector<double> ry = average_ranks({y.begin(), y.begin() + n});
  std::vector<std::pair<double, double>> ranks;
  for (size_t i = 0; i < n; ++i) ranks.emplace_back(rx[i], ry[i]);
  return fit_line(ranks).correlation();
}

int64_t OutcomeTable::observed(Observed o) const {
  return of(o, Foreseen::kFeasible) + of(o, Foreseen::kOutOfMemory) + of(o, Foreseen::kInfeasible);
}

int64_t OutcomeTable::failed_foreseen() const {
  int64_t n = 0;
  for (Observed o : {Observed::kOutOfMemory, Observed::kFailed})
    n += of(o, Foreseen::kOutOfMemory) + of(o, Foreseen::kInfeasible);
  return n;
}

int64_t OutcomeTable::completed_refused() const {
  return of(Observed::kCompleted, Foreseen::kOutOfMemory) +
         of(Observed::kCompleted, Foreseen::kInfeasible);
}

std::string_view to_string(Observed o) {
  switch (o) {
    case Observed::kCompleted:
      return "completed";
    case Observed::kOutOfMemory:
      return "out_of_memory";
    case Observed::kFailed:
      return "failed";
  }
  return "?";
}

std::string_view to_string(Foreseen f) {
  switch (f) {
    case Foreseen::kFeasible:
      return "feasible";
    case Foreseen::kOutOfMemory:
      return "out_of_memory";
    case Foreseen::kInfeasible:
      return "infeasible";
  }
  return "?";
}

}  // namespace hetplan
