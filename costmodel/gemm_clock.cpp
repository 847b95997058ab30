#include "costmodel/gemm_clock.h"

#include <cmath>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "costmodel/profile.h"
#include "costmodel/stats.h"

namespace hetplan {
namespace {

// `points` with their times put on `reference_mhz`: the share of each time that follows the SM
// clock (`analytical`'s elasticity) scaled by clock / reference. Points without a clock stay as
// measured.
std::vector<GemmPoint> on_reference_clock(const GemmModel& analytical,
                                          std::vector<GemmPoint> points, double reference_mhz) {
  for (GemmPoint& p : points)
    if (p.sm_mhz > 0)
      p.time_s *= std::pow(p.sm_mhz / reference_mhz, analytical.clock_elasticity(p.shape));
  return points;
}

// The table as measured ([0]) and on the reference clock ([1]).
struct TwoClocks {
  GemmModel analytical;  // the table's coefficients, no measurements: the elasticities
  GemmTable table[2];
};

TwoClocks two_clocks(Dtype dtype, const GemmTable& t, const GpuSpec& gpu, double memory_GBps,
                     double reference_mhz) {
  TwoClocks out{gemm_model_for(dtype, {{}, t.efficiency}, gpu, memory_GBps), {t, t}};
  out.table[1].points = on_reference_clock(out.analytical, t.points, reference_mhz);
  return out;
}

}  // namespace

GemmClockCheck check_gemm_clocks(Dtype dtype, const std::map<Dtype, GemmTable>& tables,
                                 std::optional<Dtype> companion, const GpuSpec& gpu,
                                 double memory_GBps) {
  GemmClockCheck check;
  const auto own_it = tables.find(dtype);
  if (own_it == tables.end()) return check;
  std::vector<double> mhz;
  for (const GemmPoint& p : own_it->second.points)
    if (p.sm_mhz > 0) mhz.push_back(p.sm_mhz);
  check.points = static_cast<int64_t>(mhz.size());
  if (mhz.size() < kMinClockShapes) return check;
  const Distribution clocks = summarize(mhz);
  const double reference = clocks.median;
  check.reference_mhz = reference;
  check.mhz_p10 = clocks.p10;
  check.mhz_p90 = clocks.p90;
  check.mhz_min = clocks.min;
  check.mhz_max = clocks.max;

  const TwoClocks own = two_clocks(dtype, own_it->second, gpu, memory_GBps, reference);
  std::optional<TwoClocks> other;
  if (companion)
    if (auto it = tables.find(*companion); it != tables.end())
      other = two_clocks(*companion, it->second, gpu, memory_GBps, reference);

  std::vector<double> errors[2];
  std::vector<std::pair<double, double>> xy;  // elasticity x log clock ratio, log residual
  for (int fold = 0; fold < kGemmFolds; ++fold) {
    std::vector<GemmPoint> held = gemm_fold_points(own_it->second.points, fold, true);
    std::erase_if(held, [](const GemmPoint& p) { return !(p.sm_mhz > 0); });
    if (held.empty()) continue;
    for (int known = 0; known < 2; ++known) {
      GemmModel m = gemm_model_for(
          dtype,
          {gemm_fold_points(own.table[known].points, fold, false), own.table[known].efficiency},
          gpu, memory_GBps);
      if (other)
        m.set_companion(gemm_model_for(*companion,
                                       {gemm_fold_points(other->table[known].points, fold, false),
                                        other->table[known].efficiency},
                                       gpu, memory_GBps));
      for (const GemmPoint& p : held) {
        const double elasticity = own.analytical.clock_elasticity(p.shape);
        double predicted = m.time_s(p.shape);
        if (known) predicted *= std::pow(reference / p.sm_mhz, elasticity);
        errors[known].push_back(std::abs(predicted / p.time_s - 1));
        if (!known && elasticity >= kComputeBoundElasticity)
          xy.emplace_back(elasticity * std::log(p.sm_mhz / reference),
                          std::log(p.time_s / predicted));
      }
    }
  }
  check.as_measured = summarize_errors(std::move(errors[0]));
  check.as_measured.method = fmt::format("{}-fold cross-validation of the correction", kGemmFolds);
  check.clock_known = summarize_errors(std::move(errors[1]));
  check.clock_known.method =
      check.as_measured.method +
      fmt::format(", times put on {:.0f} MHz and back on each shape's own clock", reference);

  check.compute_bound = static_cast<int64_t>(xy.size());
  if (xy.size() >= kMinClockShapes) {
    const LineFit line = fit_line(xy);
    // Clocks that differ by less than about 0.01% (0.2 MHz at 2 GHz) carry no slope.
    if (line.sxx > double(xy.size()) * 1e-8) {
      check.slope = line.slope;
      check.r2 = line.r2();
    }
  }
  return check;
}

Json to_json(const GemmClockCheck& c) {
  Json j = {{"points", c.points}};
  if (!c.checked()) return j;
  j["reference_mhz"] = c.reference_mhz;
  j["mhz_p10"] = c.mhz_p10;
  j["mhz_p90"] = c.mhz_p90;
  j["mhz_min"] = c.mhz_min;
  j["mhz_max"] = c.mhz_max;
  j["compute_bound"] = c.compute_bound;
  j["slope"] = c.slope ? Json(*c.slope) : Json(nullptr);
  j["r2"] = c.r2;
  j["cross_validated_as_measured"] = to_json(c.as_measured);
  j["cross_validated_clock_known"] = to_json(c.clock_known);
  return j;
}

}  // namespace hetplan
