// Layer sweeps of `--layers MODEL`: the exact GEMMs of the model's layers (forward, input-gradient
// and weight-gradient, with their transposes) at the micro-batch sizes and tensor widths the search
// considers, and the per-layer F/B/W timing cases of its transformer blocks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "costmodel/calibration.h"
#include "costmodel/layer_ops.h"
#include "costmodel/model.h"
#include "profiler/common/gemm_plan.h"
#include "profiler/common/plan.h"

namespace hetplan::profiler {

// A run of consecutive identical layers, named by its first and last layer.
struct LayerGroup {
  std::string name;  // "h.0..h.23", or the layer's name when alone
  const LayerSpec* layer = nullptr;
  int64_t count = 0;
};
std::vector<LayerGroup> group_identical_layers(const ModelSpec& model);

// Every layer GEMM of `model` (costmodel's layer_work: forward, input-gradient and weight-gradient
// GEMMs of each distinct layer, fused attention) for each micro-batch size, tensor width and dtype;
// origin "<model>/<layers>/<gemm>/<F|B|W>/mb<b>/tp<t>". Widths that do not divide the model are
// skipped, with the reason in `skipped` when given.
std::vector<GemmCase> layer_gemm_cases(const ModelSpec& model,
                                       const std::vector<int64_t>& micro_batches,
                                       const std::vector<int64_t>& tensor_widths,
                                       const std::vector<Dtype>& dtypes,
                                       std::vector<std::string>* skipped = nullptr);

// One per-layer timing: a transformer block's shard on one GPU.
struct LayerTimingCase {
  std::string model;  // for the label
  std::string style;  // "gpt" (LayerNorm, biases, GeLU) or "llama" (RMSNorm, SwiGLU, rotary)
  Dtype dtype = Dtype::kBf16;
  int64_t micro_batch = 1, seq_len = 0, hidden = 0, heads = 0, kv_heads = 0, head_dim = 0;
  int64_t ffn_hidden = 0, tp = 1;
  bool bias = true, rotary = false, causal = true;
  double dropout = 0;  // residual dropouts (attention dropout is not modelled)
};

// Timing cases of each distinct transformer block of `model` (MoE blocks are left out: their
// experts' GEMMs are in the GEMM sweep; so are widths that do not divide the model). Style from
// the block: RMSNorm -> llama, else gpt.
std::vector<LayerTimingCase> layer_timing_cases(const ModelSpec& model,
                                                const std::vector<int64_t>& micro_batches,
                                                const std::vector<int64_t>& tensor_widths,
                                                Dtype dtype);
// The activation bytes costmodel expects the case to keep for backward (no recomputation).
double expected_activation_bytes(const LayerTimingCase& c);
// "layer/llama/bf16/b4/s4096/h4096/a32/g32/d128/f11008/tp2" (+ "/nobias", "/full" when not
// causal, "/p0.1" with dropout).
std::string layer_key(const LayerTimingCase& c);
// Expected seconds to build, check and time the F, B and W passes on an H100 (estimate only).
double estimate_layer_s(const LayerTimingCase& c, bool quick);
std::vector<PlanItem> layer_timing_items(const std::vector<LayerTimingCase>& cases, bool quick);
Json to_spec(const LayerTimingCase& c);
LayerTimingCase layer_case_from_spec(const Json& spec);

}  // namespace hetplan::profiler
