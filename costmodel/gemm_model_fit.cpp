// Fitting the analytical GEMM model (costmodel/gemm_model.h) to measured times: robust least
// squares on log time, Nelder-Mead over the continuous coefficients, one run per candidate
// largest tile. docs/fit.md gives the method and its held-out accuracy.
#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <vector>

#include "costmodel/gemm_model.h"
#include "costmodel/stats.h"

namespace hetplan {
namespace {

// Residuals beyond this (in log time, about 5%) count linearly: outliers such as an unlucky
// kernel choice should not drag the coefficients.
constexpr double kHuberDelta = 0.05;
// The fit sees at most this many points (a stable subset by shape hash); it has seven
// coefficients, and the measured-table correction uses every point anyway.
constexpr size_t kMaxFitPoints = 900;
constexpr int kMaxEvaluations = 500;

constexpr size_t kParams = 7;
using Params = std::array<double, kParams>;

// Coefficients from the optimiser's unconstrained parameters, clamped to plausible ranges.
double clamp(double x, CoefficientRange r) { return std::clamp(x, r.lo, r.hi); }

GemmEfficiency decode(const Params& x, GemmEfficiency e) {
  e.peak_fraction = clamp(std::exp(x[0]), kPeakFractionRange);
  e.overhead_s = clamp(std::exp(x[1]), kOverheadRange);
  e.k_half = clamp(std::exp(x[2]), kKHalfRange);
  e.tile_exponent = clamp(x[3], kTileExponentRange);
  e.memory_fraction = clamp(std::exp(x[4]), kMemoryFractionRange);
  e.blend = clamp(std::exp(x[5]), kBlendRange);
  e.wave_smoothing = clamp(x[6], kWaveSmoothingRange);
  return e;
}

Params encode(const GemmEfficiency& e) {
  return {std::log(clamp(e.peak_fraction, kPeakFractionRange)),
          std::log(clamp(e.overhead_s, kOverheadRange)),
          std::log(clamp(e.k_half, kKHalfRange)),
          clamp(e.tile_exponent, kTileExponentRange),
          std::log(clamp(e.memory_fraction, kMemoryFractionRange)),
          std::log(clamp(e.blend, kBlendRange)),
          clamp(e.wave_smoothing, kWaveSmoothingRange)};
}

double huber(double r) {
  const double a = std::abs(r);
  return a <= kHuberDelta ? 0.5 * r * r : kHuberDelta * (a - 0.5 * kHuberDelta);
}

// Nelder-Mead minimisation from `start` with initial steps `step`.
Params nelder_mead(const std::function<double(const Params&)>& f, Params start, const Params& step,
                   int max_evaluations, double& best_value) {
  std::array<Params, kParams + 1> simplex;
  std::array<double, kParams + 1> value;
  simplex[0] = start;
  for (size_t i = 0; i < kParams; ++i) {
    simplex[i + 1] = start;
    simplex[i + 1][i] += step[i];
  }
  int evaluations = 0;
  for (size_t i = 0; i <= kParams; ++i) value[i] = f(simplex[i]), ++evaluations;
  while (evaluations < max_evaluations) {
    std::array<size_t, kParams + 1> order;
    for (size_t i = 0; i <= kParams; ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return value[a] < value[b]; });
    const size_t best = order[0], worst = order[kParams], second = order[kParams - 1];
    if (value[worst] - value[best] <= 1e-10 * (1 + std::abs(value[best]))) break;
    Params centroid{};
    for (size_t i = 0; i <= kParams; ++i)
      if (i != worst)
        for (size_t j = 0; j < kParams; ++j) centroid[j] += simplex[i][j] / kParams;
    auto along = [&](double t) {
      Params p;
      for (size_t j = 0; j < kParams; ++j)
        p[j] = centroid[j] + t * (simplex[worst][j] - centroid[j]);
      return p;
    };
    const Params reflected = along(-1);
    const double fr = f(reflected);
    ++evaluations;
    if (fr < value[best]) {
      const Params expanded = along(-2);
      const double fe = f(expanded);
      ++evaluations;
      if (fe < fr) {
        simplex[worst] = expanded, value[worst] = fe;
      } else {
        simplex[worst] = reflected, value[worst] = fr;
      }
    } else if (fr < value[second]) {
      simplex[worst] = reflected, value[worst] = fr;
    } else {
      const Params contracted = fr < value[worst] ? along(-0.5) : along(0.5);
      const double fc = f(contracted);
      ++evaluations;
      if (fc < std::min(fr, value[worst])) {
        simplex[worst] = contracted, value[worst] = fc;
      } else {  // shrink towards the best vertex
        for (size_t i = 0; i <= kParams; ++i) {
          if (i == best) continue;
          for (size_t j = 0; j < kParams; ++j)
            simplex[i][j] = simplex[best][j] + 0.5 * (simplex[i][j] - simplex[best][j]);
          value[i] = f(simplex[i]);
          ++evaluations;
        }
      }
    }
  }
  size_t best = 0;
  for (size_t i = 1; i <= kParams; ++i)
    if (value[i] < value[best]) best = i;
  best_value = value[best];
  return simplex[best];
}

// A stable subset of at most `limit` points, spread over the shapes by their hash.
std::vector<GemmPoint> fit_subset(const std::vector<GemmPoint>& points, size_t limit) {
  std::vector<GemmPoint> valid;
  for (const auto& p : points)
    if (p.time_s > 0) valid.push_back(p);
  if (valid.size() <= limit) return valid;
  std::sort(valid.begin(), valid.end(), [](const GemmPoint& a, const GemmPoint& b) {
    return gemm_shape_hash(a.shape) < gemm_shape_hash(b.shape);
  });
  std::vector<GemmPoint> out;
  const double stride = double(valid.size()) / double(limit);
  for (size_t i = 0; i < limit; ++i) out.push_back(valid[static_cast<size_t>(i * stride)]);
  return out;
}

// Starting peak fraction and overhead for one largest tile: the efficiency of the largest GEMMs
// under a unit model, and the median excess time of the smallest ones.
GemmEfficiency initial_guess(const std::vector<GemmPoint>& pts, GemmEfficiency e, double peak,
                             double bandwidth, int64_t sms, double bytes) {
  e.peak_fraction = 1;
  e.overhead_s = 0;
  GemmModel unit(e, peak, bandwidth, sms, bytes);
  std::vector<std::pair<double, double>> by_flops;
  for (const auto& p : pts)
    by_flops.emplace_back(p.shape.flops(), unit.analytical_s(p.shape) / p.time_s);
  std::sort(by_flops.begin(), by_flops.end());
  std::vector<double> top;
  for (size_t i = by_flops.size() * 3 / 4; i < by_flops.size(); ++i)
    top.push_back(by_flops[i].second);
  e.peak_fraction = std::clamp(summarize(top).median, 0.05, 1.0);
  GemmModel scaled(e, peak, bandwidth, sms, bytes);
  std::vector<double> small;
  for (const auto& p : pts)
    if (p.shape.flops() < 1e8) small.push_back(p.time_s - scaled.analytical_s(p.shape));
  e.overhead_s = small.empty() ? 5e-6 : std::clamp(summarize(small).median, 1e-6, 1e-4);
  return e;
}

}  // namespace

GemmEfficiency fit_gemm_efficiency(const std::vector<GemmPoint>& points,
                                   const GemmEfficiency& prior, double peak_flops,
                                   double memory_GBps, int64_t sm_count, double bytes_per_element) {
  const std::vector<GemmPoint> pts = fit_subset(points, kMaxFitPoints);
  if (pts.size() < 8 || !(peak_flops > 0) || !(memory_GBps > 0)) return prior;
  const std::pair<int64_t, int64_t> largest_tiles[] = {{128, 128}, {128, 256}, {256, 128}};
  GemmEfficiency best = prior;
  double best_value = std::numeric_limits<double>::infinity();
  for (auto [tm, tn] : largest_tiles) {
    GemmEfficiency base = prior;
    base.tile_m = tm;
    base.tile_n = tn;
    base = initial_guess(pts, base, peak_flops, memory_GBps, sm_count, bytes_per_element);
    auto objective = [&](const Params& x) {
      const GemmModel m(decode(x, base), peak_flops, memory_GBps, sm_count, bytes_per_element);
      double sum = 0;
      for (const auto& p : pts) sum += huber(std::log(m.analytical_s(p.shape) / p.time_s));
      return sum;
    };
    const Params step = {0.15, 0.5, 0.7, 0.25, 0.3, 0.5, 0.3};
    double value = 0;
    Params x = nelder_mead(objective, encode(base), step, kMaxEvaluations, value);
    // A restart from the optimum escapes a collapsed simplex.
    x = nelder_mead(objective, x, step, kMaxEvaluations / 2, value);
    if (value < best_value) {
      best_value = value;
      best = decode(x, base);
    }
  }
  return best;
}

}  // namespace hetplan
