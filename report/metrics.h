// Error metrics of predictions against measurements (docs/report.md defines them).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace hetplan {

// Over pairs (predicted_i, measured_i): APE_i = |p_i - m_i| / m_i, signed error (p_i - m_i) / m_i.
struct ErrorStats {
  int64_t count = 0;
  double median_ape = 0, p90_ape = 0, max_ape = 0;
  double median_signed = 0;  // > 0: predictions too high on the typical pair
};
ErrorStats error_stats(const std::vector<double>& predicted, const std::vector<double>& measured);

// 1-based ranks, ties sharing the mean of the ranks they span.
std::vector<double> average_ranks(const std::vector<double>& v);

// Spearman's rank correlation: Pearson's correlation of the average ranks. nullopt with fewer
// than two pairs or when one side is constant.
std::optional<double> spearman(const std::vector<double>& x, const std::vector<double>& y);

// Out-of-memory predicted (infeasible for memory) against observed.
struct OomTable {
  int64_t both = 0, predicted_only = 0, observed_only = 0, neither = 0;
  int64_t total() const { return both + predicted_only + observed_only + neither; }
};

}  // namespace hetplan
