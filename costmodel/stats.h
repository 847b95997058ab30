// Summary of a measured distribution: every timing in hetplan is kept as count, median and spread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "costmodel/document.h"

namespace hetplan {

struct Distribution {
  int64_t count = 0;
  double median = 0;
  double min = 0;
  double max = 0;
  double p10 = 0;
  double p90 = 0;
  double mean = 0;
  double stddev = 0;
};

// Summarises samples (any unit); percentiles by linear interpolation between order statistics.
Distribution summarize(std::vector<double> samples);
// Percentile q in [0, 1] of sorted samples, linearly interpolated.
double percentile_sorted(const std::vector<double>& sorted, double q);

// How well a fit matches measurements: |predicted / measured - 1| summarised.
struct FitQuality {
  int64_t points = 0;
  double median_rel_error = 0;
  double p95_rel_error = 0;
  std::string method;  // how it was scored, e.g. "held-out 1 in 5, with measured-table correction"
};
FitQuality summarize_errors(std::vector<double> errors);

// A least-squares line y = intercept + slope x, with the weighted sums of squared and crossed
// deviations from the weighted means it was found from.
struct LineFit {
  double slope = 0;
  double intercept = 0;
  double sxx = 0, syy = 0, sxy = 0;

  // Pearson's correlation of x and y; none where either does not vary.
  std::optional<double> correlation() const;
  // The share of y's variance the line explains, correlation squared; 0 where either is constant.
  double r2() const;
};

// How the points of fit_line count: alike, or by 1 / y^2, so that each point's relative residual
// (line - y) / y counts alike, a small time's as much as a large one's.
enum class LineWeights { kEqual, kRelative };

// The weighted least-squares line through `points` (x, y). Where every x is the same (or there
// are no points) the slope is 0 and the intercept is y's weighted mean; kRelative needs y != 0.
LineFit fit_line(const std::vector<std::pair<double, double>>& points,
                 LineWeights weights = LineWeights::kEqual);
// The same with a weight of each point's own (weights[i] >= 0 for points[i]).
LineFit fit_line(const std::vector<std::pair<double, double>>& points,
                 const std::vector<double>& weights);

// The longest a measured time is read as, in seconds: a day. Every time hetplan measures or
// imports (a kernel, a layer, a training step) is far shorter; a longer one is a unit slip or a
// corrupt file, and would make the fits' ratios and the predictions absurd.
inline constexpr double kMaxMeasuredSeconds = 86400;
// Fails `reader` at `key` ("expected seconds, at most a day, found ...") when `seconds` is over
// kMaxMeasuredSeconds: one check and one message for every reader of measured times.
void check_measured_seconds(const ObjectReader& reader, std::string_view key, double seconds);

// JSON form with a unit suffix on every field: {"count", "median_s", "min_s", ...} for unit "s".
Json to_json(const Distribution& d, const char* unit_suffix = "s");
// Reads it back, refusing what summarize() cannot give (min <= p10 <= median <= p90 <= max, the
// mean between the extremes, min >= 0, median > 0) and, in seconds, times over a day.
Distribution distribution_from_json(ObjectReader reader, const char* unit_suffix = "s");

}  // namespace hetplan
