// Per-layer profiles made by other tools into hetplan calibration files (source imported:<tool>):
// AMP's known-cost arrays and Helix's serving profiles. See docs/formats.md.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "costmodel/calibration.h"
#include "costmodel/document.h"

namespace hetplan {

struct ProfileImportOptions {
  std::string gpu_type;       // override the GPU type read from the file or folder names
  std::string model;          // override the model read from the file or folder names
  std::optional<int64_t> tp;  // AMP: override the tensor-parallel degree of the file names
};

// AMP's src/known_cost/<model>_<machine>_<tp>.npy: per-layer forward seconds at micro-batch 1
// (fp16, Megatron-LM v1.1.5 inside DeepSpeed). Machines: G4 = g4dn.12xlarge (T4), P3 = p3.8xlarge
// (V100). gpt2's 30 entries map onto hetplan's gpt2-medium layers (embedding, 24 blocks, head);
// other models' entries are kept with layer -1. All files must be of one machine type. A folder in
// `inputs` stands for its .npy files.
CalibrationFile import_amp_known_cost(const std::vector<std::filesystem::path>& inputs,
                                      const ProfileImportOptions& options);

// One entry of a known-cost array (AMP's layout, which Sailor's profiles share): `seconds`, the
// entry's forward time at micro-batch 1, as a layer_forward record with `entry` set and the rest
// left to the caller; InputError naming `origin` and the index for a time that is not > 0 s and
// at most a day.
LayerForwardMeasurement known_cost_record(const std::string& origin, size_t entry, double seconds);

// Sailor's per-layer profiles, sailor/Planner/baselines/AMP/profiles/<model>/<GPU>/
// profile_<tp>.npy (github:eth-easl/sailor; AMP's layout): forward seconds at micro-batch 1 of
// each entry of the model's layer list (OPT-350: embedding, 24 layers, head), fp32 with TF32
// GEMMs where the GPU has them. The GPU comes from the folder name (V100-16, A100-40, A100-80,
// GH-96, RTX-3090, Titan-RTX) unless --gpu-type names it, the model from the folder above
// unless --model does; the node a GPU folder ran on, where the repository says, gives the
// tensor-parallel links. Inputs are GPU folders or the files, all of one GPU type.
CalibrationFile import_sailor_profiles(const std::vector<std::filesystem::path>& inputs,
                                       const ProfileImportOptions& options);

// Helix's profiles/<model>/<gpu>/{prompt,decode}_bs2time.csv (rows "tokens,milliseconds" for one
// transformer layer served by vLLM on one machine). Inputs are such folders or the CSV files
// themselves, all of one GPU type (a100, v100, l4, t4; "l4x2" = two L4s in one machine).
CalibrationFile import_helix_profiles(const std::vector<std::filesystem::path>& inputs,
                                      const ProfileImportOptions& options);

// kernels/bench's JSON (hetplan_kernel_bench --json, schema hetplan.kernel_bench/1): each case
// with status "ok" becomes a kernel measurement; the bench's device context the provenance. All
// files must come from one GPU. Source stays "measured".
CalibrationFile import_kernel_bench(const std::vector<std::filesystem::path>& files,
                                    const ProfileImportOptions& options);
// The bench's `context` object into a provenance: GPU (the same as `p` already names, if any; its
// type key unless `p` has one), SMs, L2 and memory, driver and runtime, host, date, command.
void read_kernel_bench_context(ObjectReader r, Provenance& p);

// scripts/bench_attention_torch.py's JSON (schema hetplan.attention_vs_torch/1): PyTorch's
// scaled_dot_product_attention per backend as kernel records sdpa_fwd_<backend> and
// sdpa_bwd_<backend> (backward = forward + backward less forward), FLOPs as FlashAttention counts
// them. Source "measured".
CalibrationFile import_torch_sdpa(const std::vector<std::filesystem::path>& files,
                                  const ProfileImportOptions& options);

}  // namespace hetplan
