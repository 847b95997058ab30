// Whether a dtype's GEMM times scatter around the model because of the SM clock they ran at. A
// power-capped GPU running large GEMMs holds a clock that depends on its temperature and power at
// the time (on the H100 1755-1980 MHz would be 12%), so the same shape timed twice, or two layouts
// of one shape on the same kernel, may differ by more than their samples spread
// (docs/benchmarks.md, item 16). Every timing records its clock (`method.clocks`,
// docs/calibrate.md); this check reads them against the correction's cross-validated residuals:
//
// - the slope of log(measured / predicted) against elasticity x log(clock / reference clock) over
//   the compute-bound shapes: -1 where time follows 1 / clock, 0 where the clock does not matter;
// - the cross-validated error as measured, and with each shape's clock known: every time put on
//   the reference clock before the correction (compute-bound share scaled by clock / reference),
//   each prediction put back on the held-out shape's own clock. The gap between the two is what
//   the clock costs the held-out score; a cost model predicting at one clock cannot have it back
//   for shapes it has not measured, but it says whether the scatter is the clock or the shapes.
//
// `hetplan fit` prints it for every dtype whose GEMMs carry clock records. It changes no fitted
// value.
#pragma once

#include <cstdint>
#include <map>
#include <optional>

#include "costmodel/gemm_companion.h"

namespace hetplan {

// A shape is compute-bound for the slope when at least this share of its time follows the clock
// (GemmModel::clock_elasticity).
inline constexpr double kComputeBoundElasticity = 0.5;
// Measured shapes with clocks the check needs (fewer: no check), and compute-bound ones the slope
// needs.
inline constexpr size_t kMinClockShapes = 10;

struct GemmClockCheck {
  int64_t points = 0;        // measured shapes with a clock record
  double reference_mhz = 0;  // the median of their clocks: what "clock known" puts times on
  double mhz_p10 = 0, mhz_p90 = 0, mhz_min = 0, mhz_max = 0;
  // The compute-bound shapes' slope and the share of their residuals' variance it explains; no
  // slope where fewer than kMinClockShapes are compute-bound or their clocks do not differ.
  int64_t compute_bound = 0;
  std::optional<double> slope;
  double r2 = 0;
  // kGemmFolds-fold cross-validated |error| over the shapes with a clock record.
  FitQuality as_measured, clock_known;

  bool checked() const { return as_measured.points > 0; }
};

// The check of `dtype`'s table among `tables` (one GPU type's), with `companion`'s measurements
// joined to the correction as the profile joins them (costmodel/gemm_companion.h). Unchecked
// (points only) below kMinClockShapes shapes with clocks.
GemmClockCheck check_gemm_clocks(Dtype dtype, const std::map<Dtype, GemmTable>& tables,
                                 std::optional<Dtype> companion, const GpuSpec& gpu,
                                 double memory_GBps);

Json to_json(const GemmClockCheck& c);

}  // namespace hetplan
