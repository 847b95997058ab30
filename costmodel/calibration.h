// The calibration file: raw measurements of one GPU type (or one node kind, or a cluster's links)
// with their provenance. Written by `hetplan calibrate` and the importers, read by `hetplan fit`
// and by the cost model. Versioned JSON; see docs/formats.md.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "costmodel/calibration_records.h"
#include "costmodel/document.h"
#include "costmodel/provenance.h"

namespace hetplan {

inline constexpr const char* kCalibrationFormat = "hetplan-calibration";
inline constexpr int kCalibrationSchemaVersion = 1;

// The most a fixed cost per kernel (launch and epilogue) is read as, in seconds: microseconds
// on any GPU, so a larger one is a unit slip that would make every time absurd.
inline constexpr double kMaxLaunchS = 1e-3;

// Datasheet priors for a GPU type: what the cost model assumes before anything is measured.
struct DatasheetPriors {
  std::map<std::string, double> gemm_efficiency;  // dtype -> fraction of peak on large GEMMs
  double memory_efficiency = 0;  // fraction of datasheet HBM bandwidth reached by streaming kernels
  double kernel_launch_s = 0;    // fixed cost per kernel
  double attention_efficiency = 0;  // fused attention, fraction of the dense bf16 peak
  // A GPU type whose fitted GEMM coefficients (efficiency, K ramp, tiles, waves, memory bound)
  // this one takes for each dtype it has no GEMM measurements of and that one measured: the
  // calibrated GPU the priors assume its kernels behave like ("" = none: the fractions above).
  std::string gemm_curve_from;
};

struct CalibrationFile {
  Provenance context;
  std::vector<GemmMeasurement> gemm;
  std::vector<KernelMeasurement> kernels;
  std::vector<LayerMeasurement> layers;
  std::vector<CollectiveMeasurement> collectives;
  std::vector<P2pMeasurement> p2p;
  std::vector<HostDeviceMeasurement> host_device;
  std::vector<LayerForwardMeasurement> layer_forward;  // imported (imported:amp)
  std::vector<ServingLayerMeasurement> serving_layer;  // imported (imported:helix)
  std::vector<HostMeasurement> host;                   // host cost per kernel (eager steps)
  std::vector<FailedMeasurement> failures;
  std::optional<DatasheetPriors> datasheet;
  std::string origin;  // path it was read from
};

Json to_json(const CalibrationFile& file);
CalibrationFile calibration_from_document(const Document& doc);

CalibrationFile load_calibration(const std::filesystem::path& path);
// Writes atomically (temporary file, then rename) so an interrupted write never leaves half a file.
void save_calibration(const CalibrationFile& file, const std::filesystem::path& path);
// What `file` holds that belongs to its one GPU type (context.gpu_type): GEMM, kernel, layer,
// layer_forward, serving_layer and host measurements and datasheet priors, as "8 GEMM, 2 kernel";
// empty when it holds none (a communication-only file).
std::string per_gpu_records(const CalibrationFile& file);
// The GPU presets, "a100-40gb, a100-80gb, ..." (for messages).
std::string gpu_preset_names();

}  // namespace hetplan
