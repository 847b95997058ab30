// The fitted profile: cost-model coefficients per GPU type (GEMM efficiency and measured GEMM
// tables, memory bandwidth and launch overhead, per-kernel fits, attention efficiency, whole-layer
// timings) fitted from calibration files. Versioned JSON written by `hetplan fit`; see
// docs/formats.md. The profile holds no datasheet figures: peaks and bandwidths come from the GPU
// spec, the profile says which fraction of them real kernels reach.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "costmodel/attention_model.h"
#include "costmodel/calibration.h"
#include "costmodel/gemm_companion.h"
#include "costmodel/gemm_model.h"
#include "costmodel/hardware.h"
#include "costmodel/input_files.h"

namespace hetplan {

inline constexpr const char* kProfileFormat = "hetplan-profile";
inline constexpr int kProfileSchemaVersion = 1;

// A memory-bound kernel: time = overhead_s + bytes / (GBps * 1e9).
struct KernelFit {
  double GBps = 0;
  double overhead_s = 0;
  int64_t points = 0;
  double median_rel_error = 0;
};

// GpuFit::attention_source of the priors, and of torch SDPA's FLASH_ATTENTION backend's timings.
inline constexpr std::string_view kAttentionPrior = "prior";
inline constexpr std::string_view kAttentionSdpaFlash = "torch sdpa, FLASH_ATTENTION backend";

struct GpuFit {
  std::string gpu_type;
  std::string source;  // best source that contributed: measured > imported:* > datasheet > default
  std::vector<std::string> origins;  // files that contributed
  // The profile file these coefficients were read from, and its key ("gpus.H100"); empty when
  // they were fitted in this run. Not written: a profile names its sources in `origins`.
  std::string read_from, read_key;
  std::map<Dtype, GemmEfficiency> gemm;
  std::map<Dtype, std::vector<GemmPoint>> gemm_points;  // measured shapes
  std::map<Dtype, FitQuality> gemm_quality;  // held-out after `hetplan fit`, else in-sample
  std::map<Dtype, FitQuality> gemm_analytical_quality;  // the analytical model alone (held-out)
  // A dtype's companion: another dtype whose measured GEMMs join its correction
  // (costmodel/gemm_companion.h), chosen by cross-validation when the profile is fitted.
  std::map<Dtype, Dtype> gemm_companion;
  // The calibrated GPU type the priors take GEMM coefficients from (DatasheetPriors::
  // gemm_curve_from), and the dtypes they were taken for when the profile was fitted.
  std::string gemm_curve_from;
  std::vector<Dtype> gemm_curve_dtypes;
  double memory_efficiency = 0.85;  // of the datasheet bandwidth, for streaming kernels
  double launch_s = 5e-6;
  std::map<std::string, KernelFit> kernels;  // by kernels/ registry name
  double attention_efficiency = 0.35;        // fused attention forward, of the bf16/fp16 peak
  double attention_bwd_efficiency = 0.35;    // its backward (measured separately where possible)
  // Short sequences run fused attention further below its peak (fewer key blocks per query block
  // to hide each block's softmax and load latency; the causal diagonal is a larger share): the
  // efficiency at sequence s is the one above x s / (s + seq_half). 0 = the same at every length.
  double attention_seq_half = 0;
  double attention_bwd_seq_half = 0;
  // Narrow heads run further below it too: x d / (d + head_dim_half). 0 = the same at every
  // head size. The grid's critical path is modelled beside them (costmodel/attention_model.h).
  double attention_head_dim_half = 0;
  double attention_bwd_head_dim_half = 0;
  // The passes' time inside a layer over their time alone (AttentionCoefficients::in_layer_factor),
  // from the source's timings where they hold both contexts, else from hetplan's kernels timed
  // both ways; the efficiencies above are the alone context's.
  double attention_in_layer_factor = 1;
  double attention_bwd_in_layer_factor = 1;
  // The forward's (true) or the backward's coefficients as costmodel/attention_model.h takes them.
  AttentionCoefficients attention(bool forward) const;
  void set_attention(bool forward, const AttentionCoefficients& c);
  // How well the forward and backward fits match the timings they were fitted to (points 0: none).
  FitQuality attention_quality[2];
  // The timings of the attention_source, forward and backward, from every file: fitted once all
  // files are in (so that the launch they are fitted with is the files' last word).
  std::vector<AttentionSample> attention_samples[2];
  // hetplan's kernels timed alone and inside its layers, whatever the source: the in-layer
  // factor's timings where the source's have no in-layer context (SDPA timed alone only).
  std::vector<AttentionSample> attention_context_samples[2];
  // The in-layer timings each pass's in_layer_factor was fitted to (0: not fitted).
  int64_t attention_in_layer_points[2] = {0, 0};
  // Which attention the efficiencies describe: "prior", "hetplan kernels" (kernels/), or
  // "torch sdpa (...)": PyTorch's scaled_dot_product_attention, which frameworks run, preferred
  // where measured.
  std::string attention_source = std::string(kAttentionPrior);
  // Whether that is FlashAttention-2: torch SDPA's flash backend, or the priors (which take its
  // efficiency), the kernel a framework's attention_kernels are rated against.
  bool attention_is_flash2() const {
    return attention_source == kAttentionPrior || attention_source == kAttentionSdpaFlash;
  }
  // Whole-layer timings, which correct the cost model's layer times (costmodel/layer_correction.h):
  std::vector<LayerMeasurement> layers;                // F, B and W (hetplan's profiler)
  std::vector<LayerForwardMeasurement> layer_forward;  // forward only (imported: AMP)
  double context_reserve_bytes = 0;  // measured CUDA context + library reserve; 0 = prior
  // Host seconds to issue one kernel of an eager training step (PyTorch's dispatcher, autograd
  // and launch, per kernel the cost model counts), from calibration files' `host` records; the
  // evaluator's host floor (search/evaluate.cpp). 0 = not measured: no floor is applied.
  double host_s_per_kernel = 0;
  int64_t host_points = 0;  // host records it was fitted from
};

struct Profile {
  std::map<std::string, GpuFit> gpus;
  std::vector<CollectiveMeasurement> collectives;  // raw, for the communication fits
  std::vector<std::string> origins;
  std::vector<FailedMeasurement> failures;

  // The fit for `gpu_type`, or generic defaults (source "default") when nothing was calibrated.
  GpuFit gpu(const std::string& gpu_type) const;
  bool has(const std::string& gpu_type) const { return gpus.count(gpu_type) != 0; }
};

// The cost model's name for a measured kernel (costmodel/layer_ops.cpp names memory-bound ops by
// what they do): the kernels/ registry's case names lose their dtype suffix and map onto them
// ("layernorm_bwd_input_bf16" -> "layernorm_bwd"). "copy" is cudaMemcpy device to device (the
// profiler's "d2d_copy", the kernel bench's "memcpy_d2d"): what streaming kernels are held to.
std::string cost_op_name(const std::string& measured_kernel);

// A fused-attention timing (hetplan's `attention_*` or PyTorch's `sdpa_*`) with its FLOPs: fitted
// as an efficiency of the peak, not as a memory-bound kernel.
bool is_attention_measurement(const KernelMeasurement& k);

// Each dtype's measured GEMMs with its fitted coefficients (dtypes `gpu` runs, with both).
std::map<Dtype, GemmTable> gemm_tables(const GpuFit& fit, const GpuSpec& gpu);

// Fits calibration files into a profile. Files of the same GPU type are combined: measured
// sections replace imported ones, which replace datasheet priors. A GPU type's datasheet (peaks,
// bandwidth) comes from `gpu_types` (a cluster file's own types), else its preset; a type with
// neither keeps its measured points but fits no GEMM model, bandwidth or attention efficiency.
Profile fit_profile(const std::vector<CalibrationFile>& files,
                    const std::map<std::string, GpuSpec>& gpu_types = {});

// Reads calibration files and profiles from paths (files or directories, searched recursively for
// *.json) and returns the fitted profile. Profiles are merged as they are.
Profile load_profile_inputs(const std::vector<std::string>& paths);

// The files behind load_profile_inputs, read but not fitted. A file that repeats an earlier one
// (the same file, or the same bytes: costmodel/input_files.h) is read once and listed in
// `repeated`, for the caller to refuse or to note.
struct ProfileInputs {
  std::vector<CalibrationFile> calibrations;
  std::vector<Profile> profiles;
  std::vector<RepeatedInput> repeated;
};
ProfileInputs read_profile_inputs(const std::vector<std::string>& paths);
// The calibration files `paths` name (files, or folders searched for *.json as above), for the
// commands that read calibration files only (`command`: merge, fit-collectives). InputError for
// none, a file given twice (costmodel/input_files.h) or a profile among them.
std::vector<CalibrationFile> read_calibration_inputs(const std::vector<std::string>& paths,
                                                     const std::string& command);
// Fits `calibrations` (with `gpu_types` as fit_profile) and merges `profiles` into the result
// (better sources win per GPU type).
Profile merge_fitted(const std::vector<CalibrationFile>& calibrations,
                     const std::vector<Profile>& profiles,
                     const std::map<std::string, GpuSpec>& gpu_types = {});
// The *.json files under `folder` (recursively), in name order: what a folder of calibration
// files stands for.
std::vector<std::filesystem::path> json_files_under(const std::filesystem::path& folder);
// The shipped calibration data: $HETPLAN_CALIBRATION_DIR, else calibration_data/ under data_dir()
// (the installed share folder or the source tree).
std::filesystem::path default_calibration_dir();

Json to_json(const Profile& profile);
// A fit's pieces as the profile writes them (and the fit quality report repeats them).
Json to_json(const GemmEfficiency& e);
Json to_json(const FitQuality& q);
Profile profile_from_document(const Document& doc);
void save_profile(const Profile& profile, const std::filesystem::path& path);

}  // namespace hetplan
