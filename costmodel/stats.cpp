#include "costmodel/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string_view>

#include <fmt/format.h>

namespace hetplan {

double percentile_sorted(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

Distribution summarize(std::vector<double> samples) {
  Distribution d;
  if (samples.empty()) return d;
  std::sort(samples.begin(), samples.end());
  d.count = static_cast<int64_t>(samples.size());
  d.min = samples.front();
  d.max = samples.back();
  d.median = percentile_sorted(samples, 0.5);
  d.p10 = percentile_sorted(samples, 0.1);
  d.p90 = percentile_sorted(samples, 0.9);
  d.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(d.count);
  double ss = 0;
  for (double x : samples) ss += (x - d.mean) * (x - d.mean);
  d.stddev = d.count > 1 ? std::sqrt(ss / static_cast<double>(d.count - 1)) : 0;
  return d;
}

FitQuality summarize_errors(std::vector<double> errors) {
  FitQuality q;
  std::sort(errors.begin(), errors.end());
  q.points = static_cast<int64_t>(errors.size());
  q.median_rel_error = percentile_sorted(errors, 0.5);
  q.p95_rel_error = percentile_sorted(errors, 0.95);
  return q;
}

std::optional<double> LineFit::correlation() const {
  if (!(sxx > 0) || !(syy > 0)) return std::nullopt;
  return sxy / std::sqrt(sxx * syy);
}

double LineFit::r2() const {
  const std::optional<double> r = correlation();
  return r ? *r * *r : 0;
}

LineFit fit_line(const std::vector<std::pair<double, double>>& points, LineWeights weights) {
  std::vector<double> w;
  w.reserve(points.size());
  for (const auto& [x, y] : points)
    w.push_back(weights == LineWeights::kRelative ? 1 / (y * y) : 1.0);
  return fit_line(points, w);
}

LineFit fit_line(const std::vector<std::pair<double, double>>& points,
                 const std::vector<double>& weights) {
  double w_sum = 0, mx = 0, my = 0;
  for (size_t i = 0; i < points.size(); ++i) {
    const auto [x, y] = points[i];
    w_sum += weights[i];
    mx += weights[i] * x;
    my += weights[i] * y;
  }
  LineFit line;
  if (!(w_sum > 0)) return line;
  mx /= w_sum;
  my /= w_sum;
  for (size_t i = 0; i < points.size(); ++i) {
    const auto [x, y] = points[i];
    line.sxx += weights[i] * (x - mx) * (x - mx);
    line.syy += weights[i] * (y - my) * (y - my);
    line.sxy += weights[i] * (x - mx) * (y - my);
  }
  line.slope = line.sxx > 0 ? line.sxy / line.sxx : 0;
  line.intercept = my - line.slope * mx;
  return line;
}

Json to_json(const Distribution& d, const char* unit_suffix) {
  auto key = [&](const char* name) { return fmt::format("{}_{}", name, unit_suffix); };
  Json j;
  j["count"] = d.count;
  j[key("median")] = d.median;
  j[key("min")] = d.min;
  j[key("max")] = d.max;
  j[key("p10")] = d.p10;
  j[key("p90")] = d.p90;
  j[key("mean")] = d.mean;
  j[key("stddev")] = d.stddev;
  return j;
}

void check_measured_seconds(const ObjectReader& reader, std::string_view key, double seconds) {
  if (seconds > kMaxMeasuredSeconds)
    reader.fail(key, fmt::format("expected seconds, at most a day, found {}", seconds));
}

Distribution distribution_from_json(ObjectReader r, const char* unit_suffix) {
  auto key = [&](const char* name) { return fmt::format("{}_{}", name, unit_suffix); };
  Distribution d;
  d.count = r.positive_integer("count");
  d.median = r.number(key("median"));
  d.min = r.number_or(key("min"), d.median);
  d.max = r.number_or(key("max"), d.median);
  d.p10 = r.number_or(key("p10"), d.min);
  d.p90 = r.number_or(key("p90"), d.max);
  d.mean = r.number_or(key("mean"), d.median);
  d.stddev = r.non_negative_or(key("stddev"), 0);
  if (!(d.median > 0))
    r.fail(key("median"), fmt::format("expected a time > 0, found {}", d.median));
  if (d.min > d.median || d.median > d.max) r.fail(key("median"), "expected min <= median <= max");
  if (d.min < 0) r.fail(key("min"), fmt::format("expected a value >= 0, found {}", d.min));
  if (std::string_view(unit_suffix) == "s") {
    check_measured_seconds(r, key("median"), d.median);
    check_measured_seconds(r, key("max"), d.max);
  }
  // The quantiles and the mean lie between the extremes, in order (a relative 1e-9 of slack for
  // the rounding of interpolated quantiles and of a sum).
  const auto between = [&](const char* name, double x, double lo, double hi, const char* lo_name,
                           const char* hi_name) {
    const double slack = 1e-9 * d.max;
    if (!(x >= lo - slack && x <= hi + slack))
      r.fail(key(name), fmt::format("expected {} <= {} <= {}, found {} ({} {}, {} {})", lo_name,
                                    name, hi_name, x, lo_name, lo, hi_name, hi));
  };
  between("p10", d.p10, d.min, d.median, "min", "median");
  between("p90", d.p90, d.median, d.max, "median", "max");
  between("mean", d.mean, d.min, d.max, "min", "max");
  r.finish();
  return d;
}

}  // namespace hetplan
