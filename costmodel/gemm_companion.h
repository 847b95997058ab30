// A companion dtype for the GEMM correction: where two dtypes run the same kernels at the same
// speed (fp16 and bf16 on the same tensor cores), the dense table of one (bf16: M in 1.5x steps,
// N and K doubling) can correct the other's shapes, whose own table is sparser. Whether it does is
// decided per calibration by cross-validation, because it does not always help: on the H100's
// graph-timed calibration fp16 gains (5-fold p95 9.98% -> 7.77%), while on the eager-timed one,
// whose launch-bound times drifted with the host between the two dtypes' sections, it loses
// (35.1% -> 40.0%). docs/fit.md has the figures.
#pragma once

#include <map>
#include <optional>
#include <vector>

#include "costmodel/dtype.h"
#include "costmodel/gemm_model.h"
#include "costmodel/hardware.h"
#include "costmodel/stats.h"

namespace hetplan {

// Folds of the cross-validations of the GEMM correction (this choice, and the clock check of
// costmodel/gemm_clock.h).
inline constexpr int kGemmFolds = 5;
// The points whose shape lies in fold `fold` (in == true) or in another (in == false), by
// gemm_shape_bucket: a shape has the same fold in every dtype.
std::vector<GemmPoint> gemm_fold_points(const std::vector<GemmPoint>& points, int fold, bool in);
// The relative reduction of the cross-validated p95 a companion must bring: less is within what
// another split of the same table might give, and would not pay for the larger neighbour search.
inline constexpr double kCompanionMinGain = 0.05;

// Whether `other` may stand in for `dtype` on `gpu`: a different dtype with the same element size
// and the same datasheet peak (fp16 and bf16 on Ampere and Hopper; not fp8, tf32 or fp32, whose
// kernels differ).
bool may_share_gemm_kernels(const GpuSpec& gpu, Dtype dtype, Dtype other);

// One dtype's measured GEMMs and fitted analytical model, as the choice takes them.
struct GemmTable {
  std::vector<GemmPoint> points;
  GemmEfficiency efficiency;
};

struct GemmCompanionChoice {
  std::optional<Dtype> companion;  // chosen, or none
  // The cross-validated |error| of `dtype`'s shapes without and with the best candidate (no
  // points where there was no candidate or too few shapes to decide).
  FitQuality own, with;
  std::optional<Dtype> candidate;  // the candidate `with` scores
};

// Chooses `dtype`'s companion among `tables` (every dtype's, on one GPU type): the candidate
// (may_share_gemm_kernels) whose measurements, joined to the correction, give the lowest p95 over
// kGemmFolds-fold cross-validation of `dtype`'s measured shapes, when that p95 is at least
// kCompanionMinGain below the table's own and the median is no higher. The analytical coefficients
// stay as fitted (only the correction is cross-validated); the folds go by gemm_shape_bucket, so a
// shape left out of `dtype` is left out of the candidate too. No choice below kMinCompanionShapes
// own shapes.
inline constexpr size_t kMinCompanionShapes = 10;
GemmCompanionChoice choose_gemm_companion(Dtype dtype, const std::map<Dtype, GemmTable>& tables,
                                          const GpuSpec& gpu, double memory_GBps);

// The GEMM model of `dtype` on `gpu` from its table (its companion joins with set_companion).
GemmModel gemm_model_for(Dtype dtype, const GemmTable& table, const GpuSpec& gpu,
                         double memory_GBps);

}  // namespace hetplan
