// Time of a GEMM on one GPU type: a roofline whose compute side loses efficiency to tile padding,
// wave quantisation (tiles over SMs, with split-K for short, deep GEMMs) and short K loops, plus a
// fixed overhead; corrected by measured shapes nearby where the profile has them.
#pragma once

#include <cstdint>
#include <vector>

#include "costmodel/calibration.h"
#include "costmodel/hardware.h"

namespace hetplan {

// Coefficients of the analytical model for one GPU type and dtype.
struct GemmEfficiency {
  double peak_fraction = 0.8;  // of the datasheet peak, reached by large well-shaped GEMMs
  int64_t tile_m = 128, tile_n = 128;
  double k_half = 64;       // K at which the main loop runs at half its asymptotic rate
  double overhead_s = 5e-6;  // launch and epilogue
};

struct GemmPoint {
  GemmShape shape;
  double time_s = 0;
};

class GemmModel {
 public:
  GemmModel() = default;
  GemmModel(GemmEfficiency eff, double peak_flops, double memory_GBps, int64_t sm_count,
            int bytes_per_element);

  // Analytical time, without measured corrections.
  double analytical_s(const GemmShape& s) const;
  // Time: measured where the shape was measured, else analytical x the measured/analytical ratio
  // of the nearest measured shapes (in log2 m, n, k, batch space), else analytical.
  double time_s(const GemmShape& s) const;

  // Measured points (replaces earlier ones).
  void set_measurements(std::vector<GemmPoint> points);
  const std::vector<GemmPoint>& measurements() const { return points_; }
  const GemmEfficiency& efficiency() const { return eff_; }
  void set_efficiency(const GemmEfficiency& eff) { eff_ = eff; }
  double peak_flops() const { return peak_flops_; }

 private:
  GemmEfficiency eff_;
  double peak_flops_ = 0;
  double memory_GBps_ = 0;
  int64_t sm_count_ = 1;
  int bytes_ = 2;
  std::vector<GemmPoint> points_;
  std::vector<double> log_ratio_;  // log(measured / analytical) per point
};

// Fits tile, K ramp, overhead and peak fraction to measured points (least squares on log time).
// Returns the fitted efficiency; `prior` is returned unchanged when there are too few points.
GemmEfficiency fit_gemm_efficiency(const std::vector<GemmPoint>& points, const GemmEfficiency& prior,
                                   double peak_flops, double memory_GBps, int64_t sm_count,
                                   int bytes_per_element);

}  // namespace hetplan
