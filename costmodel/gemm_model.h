// Time of a GEMM on one GPU type. The analytical part is a tile and wave model: the library picks
// the fastest of a few tile sizes (smaller tiles pad less but run less efficiently), each tile's
// main loop pays a fixed prologue/epilogue cost expressed as `k_half` extra K steps, tiles run in
// waves over the SMs (split-K when there are few tiles and K is deep), and the compute and memory
// times are blended by a p-norm. Measured shapes then correct it: a shape measured exactly takes
// its measured time; others take the analytical time times the local trend of the measured /
// analytical ratio nearby (weighted local linear regression in log2 m, n, k, batch space, with an
// offset per operand layout; measurements far slower than their neighbours are left out of it).
// Another dtype's measurements can join the correction where that dtype runs the same kernels
// (bf16 for fp16: costmodel/gemm_companion.h).
// docs/fit.md describes the fit and its held-out accuracy.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "costmodel/calibration.h"
#include "costmodel/hardware.h"

namespace hetplan {

// Coefficients of the analytical model for one GPU type and dtype.
struct GemmEfficiency {
  double peak_fraction = 0.8;  // of the datasheet peak, reached by the largest tile on long K
  int64_t tile_m = 128, tile_n = 128;  // the largest tile; smaller candidates have no larger side
  double k_half = 64;                  // per-tile fixed cost, in K steps of the main loop
  double overhead_s = 5e-6;            // launch and epilogue
  double tile_exponent = 0.5;    // a smaller tile runs at (its intensity / the largest's)^this
  double memory_fraction = 1.0;  // of the streaming bandwidth reached by memory-bound GEMMs
  double blend = 8;              // p of the p-norm of compute and memory time (large = max)
  double wave_smoothing = 0;     // 0: whole waves over the SMs; 1: work spread evenly (stream-K)
};

// The range the fit keeps each coefficient in (costmodel/gemm_model_fit.cpp), and that a
// profile's coefficients are read in: outside it a term loses its meaning (a wave smoothing above
// 1 gives a partial wave a negative time). k_half and the overhead may be 0 (older profiles).
struct CoefficientRange {
  double lo, hi;
};
inline constexpr CoefficientRange kPeakFractionRange{0.02, 1.0};
inline constexpr CoefficientRange kOverheadRange{1e-7, 1e-3};  // seconds
inline constexpr CoefficientRange kKHalfRange{1.0, 4096.0};    // K steps
inline constexpr CoefficientRange kTileExponentRange{0.0, 3.0};
inline constexpr CoefficientRange kMemoryFractionRange{0.05, 1.5};
inline constexpr CoefficientRange kBlendRange{1.0, 32.0};
inline constexpr CoefficientRange kWaveSmoothingRange{0.0, 1.0};

struct GemmPoint {
  GemmShape shape;
  double time_s = 0;
  // The SM clock the measurement ran at (the median of NVML's readings, `method.clocks`), 0 where
  // none was recorded. Only `hetplan fit`'s clock check reads it (costmodel/gemm_clock.h).
  double sm_mhz = 0;
};

// A measured point as profiles and fit reports write it: the shape's keys and `time_s` (not the
// clock).
Json to_json(const GemmPoint& p);

class GemmModel {
 public:
  GemmModel() = default;
  GemmModel(GemmEfficiency eff, double peak_flops, double memory_GBps, int64_t sm_count,
            double bytes_per_element);

  // Analytical time, without measured corrections.
  double analytical_s(const GemmShape& s) const;
  // d log(analytical time) / d log(compute time): how much of the shape's time scales with the SM
  // clock. Near 1 for a compute-bound GEMM, near 0 for a memory- or launch-bound one (memory,
  // launch overhead and split-K's reduction do not follow the SM clock).
  double clock_elasticity(const GemmShape& s) const;
  // Time: measured where the shape was measured, else analytical x the locally interpolated
  // measured/analytical ratio, else (far from every measurement) analytical.
  double time_s(const GemmShape& s) const;
  // log(measured / analytical) predicted at `s` from the measurements (0 without any).
  double log_correction(const GemmShape& s) const;

  // Measured points (replaces earlier ones; repeated shapes are combined by their geometric mean).
  void set_measurements(std::vector<GemmPoint> points);
  const std::vector<GemmPoint>& measurements() const { return points_; }
  // Measured shapes left out of the correction of other shapes as glitches: slower than the
  // median of their 8 nearest measured neighbours by more than 1.8x in measured / analytical.
  // Their own time is still the measured one.
  size_t glitches() const { return glitch_shapes_.size(); }
  const std::vector<GemmShape>& glitch_shapes() const { return glitch_shapes_; }
  // Measured shapes of a companion dtype (one whose GEMMs run the same kernels at the same speed,
  // chosen by costmodel/gemm_companion.h) join the correction as if they were this dtype's,
  // counted kCompanionDistance further away: a sparse table borrows a dense one's neighbours.
  // They never count as exact matches, and `other`'s glitches stay out. Kept across
  // set_measurements() and set_efficiency(); an empty model removes them.
  void set_companion(const GemmModel& other);
  size_t companion_points() const { return companion_points_.size(); }
  const GemmEfficiency& efficiency() const { return eff_; }
  void set_efficiency(const GemmEfficiency& eff);
  double peak_flops() const { return peak_flops_; }

 private:
  struct Tile {
    int64_t m, n;
    double rel;  // efficiency relative to the largest tile
  };
  // The library's choice for a shape, in seconds: compute and memory bound of the chosen
  // configuration (blended by the p-norm) and its split-K reduction.
  struct Terms {
    double compute = 0, memory = 0, reduce = 0;
  };
  Terms terms(const GemmShape& s) const;
  struct Feature {
    double x[4];  // log2 m, n, k, batch
    int layout;   // trans_a * 2 + trans_b
    double log_ratio;
    bool companion = false;  // a companion dtype's measurement
  };
  Feature feature(const GemmPoint& p, bool companion) const;
  void prepare_tiles();
  void screen_glitches();
  void add_companion_features();

  GemmEfficiency eff_;
  double peak_flops_ = 0;
  double memory_GBps_ = 0;
  int64_t sm_count_ = 1;
  double bytes_ = 2;
  std::vector<Tile> tiles_;
  std::vector<GemmPoint> points_;
  std::vector<GemmPoint> companion_points_;  // the companion's measurements, its glitches left out
  // The measured shapes the correction uses (glitches left out), then the companion's.
  std::vector<Feature> features_;
  std::vector<GemmShape> glitch_shapes_;        // in the order of their coordinates
  std::unordered_map<uint64_t, size_t> exact_;  // shape hash -> index into points_
};

// A stable 64-bit hash of a shape (FNV-1a over m, n, k, batch and the layout).
uint64_t gemm_shape_hash(const GemmShape& s);
// The shape's bucket among `buckets` (> 0), from its hash avalanched so that neighbouring shapes
// land in unrelated buckets: what the held-out split and cross-validation folds go by. A shape
// has the same bucket in every dtype.
int gemm_shape_bucket(const GemmShape& s, int buckets);

// Fits peak fraction, overhead, k_half, tile exponent, memory fraction, blend and the largest tile
// to measured points: robust (Huber) least squares on log time, Nelder-Mead over the continuous
// coefficients for each candidate largest tile. `prior` is returned unchanged for fewer than 8
// points, and is the starting point otherwise.
GemmEfficiency fit_gemm_efficiency(const std::vector<GemmPoint>& points,
                                   const GemmEfficiency& prior, double peak_flops,
                                   double memory_GBps, int64_t sm_count, double bytes_per_element);

}  // namespace hetplan
