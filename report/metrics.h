// Error metrics of predictions against measurements (docs/report.md defines them).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
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

// How a run ended against what was predicted of it. A run that failed for another or an unknown
// reason is neither a confirmed out-of-memory nor a run that fitted: it is counted apart.
enum class Observed { kCompleted, kOutOfMemory, kFailed };
enum class Foreseen { kFeasible, kOutOfMemory, kInfeasible };  // infeasible for another reason

struct OutcomeTable {
  int64_t count[3][3] = {};  // [Observed][Foreseen]
  void add(Observed o, Foreseen f) { ++count[static_cast<int>(o)][static_cast<int>(f)]; }
  int64_t of(Observed o, Foreseen f) const {
    return count[static_cast<int>(o)][static_cast<int>(f)];
  }
  int64_t observed(Observed o) const;
  // Runs that did not complete predicted infeasible (for any reason), and completed runs
  // predicted infeasible: the two ways memory (and the rules) can break their promise.
  int64_t failed_foreseen() const;
  int64_t completed_refused() const;
};

std::string_view to_string(Observed o);
std::string_view to_string(Foreseen f);

}  // namespace hetplan
