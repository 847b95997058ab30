#include "costmodel/gemm_companion.h"

#include <cmath>

#include <fmt/format.h>

namespace hetplan {

std::vector<GemmPoint> gemm_fold_points(const std::vector<GemmPoint>& points, int fold, bool in) {
  std::vector<GemmPoint> out;
  for (const GemmPoint& p : points)
    if ((gemm_shape_bucket(p.shape, kGemmFolds) == fold) == in) out.push_back(p);
  return out;
}

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

  // |error| of every own shape predicted with its fold left out: alone (errors[0]), and with
  // each candidate joined (errors[1 + i]). Each fold's own model is built once and copied.
  std::vector<std::vector<double>> errors(1 + candidates.size());
  auto score = [](const GemmModel& m, const std::vector<GemmPoint>& held,
                  std::vector<double>& out) {
    for (const GemmPoint& p : held) out.push_back(std::abs(m.time_s(p.shape) / p.time_s - 1));
  };
  for (int fold = 0; fold < kGemmFolds; ++fold) {
    const std::vector<GemmPoint> held = gemm_fold_points(own.points, fold, true);
    if (held.empty()) continue;
    const GemmModel alone = gemm_model_for(
        dtype, {gemm_fold_points(own.points, fold, false), own.efficiency}, gpu, memory_GBps);
    score(alone, held, errors[0]);
    for (size_t i = 0; i < candidates.size(); ++i) {
      const GemmTable& other = tables.at(candidates[i]);
      GemmModel with = alone;
      with.set_companion(gemm_model_for(
          candidates[i], {gemm_fold_points(other.points, fold, false), other.efficiency}, gpu,
          memory_GBps));
      score(with, held, errors[1 + i]);
    }
  }
  choice.own = summarize_errors(std::move(errors[0]));
  for (size_t i = 0; i < candidates.size(); ++i) {
    const FitQuality with = summarize_errors(std::move(errors[1 + i]));
    if (!choice.candidate || with.p95_rel_error < choice.with.p95_rel_error) {
      choice.candidate = candidates[i];
      choice.with = with;
    }
  }
  const std::string method = fmt::format("{}-fold cross-validation of the correction", kGemmFolds);
  choice.own.method = method;
  choice.with.method =
      method + fmt::format(", with {}'s measurements", to_string(*choice.candidate));
  if (choice.with.p95_rel_error < (1 - kCompanionMinGain) * choice.own.p95_rel_error &&
      choice.with.median_rel_error <= choice.own.median_rel_error)
    choice.companion = choice.candidate;
  return choice;
}

}  // namespace hetplan
