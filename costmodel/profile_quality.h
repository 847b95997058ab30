// How well a fitted profile predicts what was measured: the GEMM model on shapes held out of the
// fit (analytical alone, and with the measured-table correction the cost model applies), the
// memory-bound kernel fits, attention efficiency, and whole layers predicted from their ops against
// measured layer timings. `hetplan fit` prints it and stores the GEMM numbers in the profile.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "costmodel/calibration.h"
#include "costmodel/gemm_model.h"
#include "costmodel/layer_correction.h"
#include "costmodel/profile.h"

namespace hetplan {

// Every `every`-th shape, chosen by a stable hash of the shape, is held out of the fit.
inline constexpr int kDefaultHoldoutEvery = 5;
bool is_held_out(const GemmShape& shape, int every);

// Relative errors |predicted / measured - 1| summarised.
FitQuality summarize_errors(std::vector<double> errors);

// The GEMM model of one GPU type and dtype, fitted without the held-out shapes.
struct GemmHoldout {
  Dtype dtype = Dtype::kBf16;
  int64_t fit_points = 0;
  FitQuality analytical;  // held-out shapes, analytical model alone
  FitQuality corrected;   // held-out shapes, with the measured-table correction (what predicts)
  FitQuality in_sample;   // every shape, analytical model fitted on every shape
  GemmEfficiency fitted;  // fitted on the fit set
};

// Splits `points`, fits on the fit set (from `prior`), and scores the held-out shapes.
GemmHoldout gemm_holdout(const std::vector<GemmPoint>& points, const GemmEfficiency& prior,
                         double peak_flops, double memory_GBps, int64_t sm_count,
                         int bytes_per_element, int every = kDefaultHoldoutEvery);

struct GpuQuality {
  std::string gpu_type;
  std::vector<GemmHoldout> gemm;
  std::map<std::string, KernelFit> kernels;
  double attention_efficiency = 0, attention_bwd_efficiency = 0;
  int64_t attention_points = 0;
  std::string attention_source;
  // Whole layers timed against the sum of their ops (costmodel/layer_correction.h), and the
  // corrections the cost model makes of them.
  std::vector<LayerTiming> layers;
  FitQuality layer_quality[3];  // |error| of F, B, W over the usable timings
  std::vector<LayerCorrection> corrections;
  // |error| of F, B, W with the corrections, each timing's micro-batch held out of its correction.
  FitQuality corrected_layer_quality[3];
};

struct FitReport {
  int holdout_every = kDefaultHoldoutEvery;
  std::vector<GpuQuality> gpus;
};

// Scores `profile` (fitted from `files`) per GPU type. GPU types that are not presets get no GEMM
// or layer scores (their peaks are unknown). Also stores each held-out GEMM score in
// `profile.gpus[type].gemm_quality`.
FitReport assess_profile(Profile& profile, const std::vector<CalibrationFile>& files,
                         int every = kDefaultHoldoutEvery);

Json to_json(const FitReport& report);

}  // namespace hetplan
