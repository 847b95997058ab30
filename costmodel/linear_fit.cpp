#include "costmodel/linear_fit.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "costmodel/stats.h"

namespace hetplan {
namespace {

// A free fixed term this small against the largest y is rounding (see linear_fit.h).
constexpr double kRoundingOfFixed = 1e-9;

double relative_cost(const std::vector<FitPoint>& pts, double fixed, double slope) {
  double c = 0;
  for (const FitPoint& p : pts) {
    const double r = (fixed + slope * p.x) / p.y - 1;
    c += p.weight * r * r;
  }
  return c;
}

// The slope through the origin that minimises relative_cost: sum w (x/y) / sum w (x/y)^2.
double slope_through_origin(const std::vector<FitPoint>& pts) {
  double num = 0, den = 0;
  for (const FitPoint& p : pts) {
    const double u = p.x / p.y;
    num += p.weight * u;
    den += p.weight * u * u;
  }
  return den > 0 ? num / den : 0;
}

// The constant that minimises relative_cost: sum w / y / sum w / y^2.
double best_constant(const std::vector<FitPoint>& pts) {
  double num = 0, den = 0;
  for (const FitPoint& p : pts) {
    num += p.weight / p.y;
    den += p.weight / (p.y * p.y);
  }
  return den > 0 ? num / den : 0;
}

// The bounded line where the free one breaks a bound: the better of fixed = 0 and slope = 0.
void bounded_line(const std::vector<FitPoint>& pts, FixedSlopeFit& f) {
  const double s = slope_through_origin(pts), c = best_constant(pts);
  const bool use_constant =
      f.free_slope <= 0 &&
      (f.free_fixed >= 0 || relative_cost(pts, c, 0) < relative_cost(pts, 0, s));
  f.fixed = use_constant ? c : 0;
  f.slope = use_constant ? 0 : s;
  f.form = use_constant ? FitForm::kConstant : FitForm::kThroughOrigin;
}

void fill_residuals(const std::vector<FitPoint>& pts, FixedSlopeFit& f) {
  std::vector<double> errs;
  double ss = 0;
  for (const FitPoint& p : pts) {
    errs.push_back(std::abs(f.at(p.x) / p.y - 1));
    ss += errs.back() * errs.back();
  }
  f.points = static_cast<int64_t>(pts.size());
  f.rms_rel_residual = std::sqrt(ss / static_cast<double>(pts.size()));
  f.median_rel_residual = summarize(errs).median;
  f.max_rel_residual = *std::max_element(errs.begin(), errs.end());
}

std::vector<FitPoint> usable(const std::vector<FitPoint>& points, FixedSlopeFit& f) {
  std::vector<FitPoint> pts;
  for (const FitPoint& p : points)
    if (p.x > 0 && p.y > 0 && std::isfinite(p.x) && std::isfinite(p.y) && p.weight >= 0)
      pts.push_back(p);
  if (pts.empty()) return pts;
  auto [lo, hi] = std::minmax_element(
      pts.begin(), pts.end(), [](const FitPoint& a, const FitPoint& b) { return a.x < b.x; });
  f.x_spread = hi->x / lo->x;
  return pts;
}

}  // namespace

FixedSlopeFit fit_through_origin(const std::vector<FitPoint>& points) {
  FixedSlopeFit f;
  const std::vector<FitPoint> pts = usable(points, f);
  if (pts.empty()) return f;
  f.slope = slope_through_origin(pts);
  f.form = FitForm::kThroughOrigin;
  fill_residuals(pts, f);
  return f;
}

FixedSlopeFit fit_fixed_plus_slope(const std::vector<FitPoint>& points) {
  FixedSlopeFit f;
  const std::vector<FitPoint> pts = usable(points, f);
  if (pts.empty()) return f;
  if (!f.fixed_identifiable()) return fit_through_origin(pts);
  // Weighted by weight / y^2: the squared relative residuals of linear_fit.h.
  std::vector<std::pair<double, double>> xy;
  std::vector<double> w;
  double ymax = 0;
  for (const FitPoint& p : pts) {
    xy.emplace_back(p.x, p.y);
    w.push_back(p.weight / (p.y * p.y));
    ymax = std::max(ymax, p.y);
  }
  const LineFit line = fit_line(xy, w);
  f.free_slope = line.slope;
  f.free_fixed = std::abs(line.intercept) < kRoundingOfFixed * ymax ? 0 : line.intercept;
  if (f.free_slope > 0 && f.free_fixed >= 0) {
    f.fixed = f.free_fixed;
    f.slope = f.free_slope;
    f.form = FitForm::kLine;
  } else {
    bounded_line(pts, f);
  }
  fill_residuals(pts, f);
  return f;
}

}  // namespace hetplan
