#include "costmodel/gemm_companion.h"

#include <cmath>

#include <fmt/format.h>

namespace hetplan {
namespace {

// The table's points whose shape is in fold `fold` (in == true) or not.
std::vector<GemmPoint> fold_points(const std::vector<GemmPoint>& points, int fold, bool in) {
  std::vector<GemmPoint> out;
  for (const GemmPoint& p : points)
    if ((gemm_shape_bucket(p.shape, kCompanionFolds) == fold) == in) out.push_back(p);
  return out;
}

}  // namespace

bool may_share_gemm_kernels(const GpuSpec& gpu, Dtype dtype, Dtype other) {
  return dtype != other && gpu.supports(dtype) && gpu.supports(other) &&
         dtype_bytes(dtype) == dtype_bytes(other) && gpu.peak_flops(dtype) == gpu.peak_flops(other);
}

GemmModel gemm_model_for(Dtype dtype, const GemmTable& table, const GpuSpec& gpu,
                         double memory_GBps) {
  GemmModel m(table.efficiency, gpu.peak_flops(dtype), memory_GBps, gpu.sm_count,
              dtype_bytes(dtype));
  m.set_measurements(table.points);
  return m;
}

GemmCompanionChoice choose_gemm_companion(Dtype dtype, const std::map<Dtype, GemmTable>& tables,
                                          const GpuSpec& gpu, double memory_GBps) {
  GemmCompanionChoice choice;
  auto own_it = tables.find(dtype);
  if (own_it == tables.end() || own_it->second.points.size() < kMinCompanionShapes) return choice;
  const GemmTable& own = own_it->second;
  std::vector<Dtype> candidates;
  for (const auto& [other, table] : tables)
    if (!table.points.empty() && may_share_gemm_kernels(gpu, dtype, other))
      candidates.push_back(other);
  if (candidates.empty()) return choice;

  // |error| of every own shape predicted with its fold left out, with `companion` joined if given.
  auto cross_validate = [&](const GemmTable* companion, std::optional<Dtype> companion_dtype) {
    std::vector<double> errors;
    for (int fold = 0; fold < kCompanionFolds; ++fold) {
      const std::vector<GemmPoint> held = fold_points(own.points, fold, true);
      if (held.empty()) continue;
      GemmModel m = gemm_model_for(dtype, {fold_points(own.points, fold, false), own.efficiency},
                                   gpu, memory_GBps);
      if (companion)
        m.set_companion(gemm_model_for(
            *companion_dtype, {fold_points(companion->points, fold, false), companion->efficiency},
            gpu, memory_GBps));
      for (const GemmPoint& p : held) errors.push_back(std::abs(m.time_s(p.shape) / p.time_s - 1));
    }
    return summarize_errors(std::move(errors));
  };
  choice.own = cross_validate(nullptr, std::nullopt);
  for (Dtype c : candidates) {
    const FitQuality with = cross_validate(&tables.at(c), c);
    if (!choice.candidate || with.p95_rel_error < choice.with.p95_rel_error) {
      choice.candidate = c;
      choice.with = with;
    }
  }
  const std::string method =
      fmt::format("{}-fold cross-validation of the correction", kCompanionFolds);
  choice.own.method = method;
  choice.with.method =
      method + fmt::format(", with {}'s measurements", to_string(*choice.candidate));
  if (choice.with.p95_rel_error < (1 - kCompanionMinGain) * choice.own.p95_rel_error &&
      choice.with.median_rel_error <= choice.own.median_rel_error)
    choice.companion = choice.candidate;
  return choice;
}

}  // namespace hetplan
