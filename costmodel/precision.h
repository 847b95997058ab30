// Low-precision training recipes (Transformer Engine's, as Megatron-Core and NeMo run them): which
// GEMMs they run in fp8 or fp4, and the quantisation kernels and weight copies they add.
//
//   bf16           every GEMM in bf16 (no quantisation)
//   fp8-delayed    tensorwise fp8 with delayed scaling (TE DelayedScaling: each tensor's scale
//                  from an amax history of earlier steps; HYBRID, e4m3 forward and e5m2 backward)
//   fp8-current    tensorwise fp8 with current scaling (TE Float8CurrentScaling: the tensor's own
//                  amax first, then the cast)
//   fp8-blockwise  fp8 with a scale per 1x128 block of activations and gradients and per 128x128
//                  block of weights (TE Float8BlockScaling, DeepSeek-V3's recipe; fp32 scales)
//   mxfp8          MXFP8: a power-of-two (E8M0) scale per 32 consecutive elements, both
//                  orientations quantised (TE MXFP8BlockScaling; Blackwell)
//   nvfp4          NVFP4: fp4 (E2M1) with an E4M3 scale per 16 elements and one fp32 scale per
//                  tensor; 16x16 blocks for weights, a random Hadamard transform on the weight
//                  gradient's inputs, stochastic rounding of gradients (TE NVFP4BlockScaling;
//                  Abecassis et al. 2025, "Pretraining Large Language Models with NVFP4")
//
// Sources: Transformer Engine 2.x user guide, "Low precision training" (features/
// low_precision_training/{fp8_delayed_scaling, fp8_current_scaling, fp8_blockwise_scaling, mxfp8,
// nvfp4}), and docs/costmodel.md "Low precision".
#pragma once

#include <string_view>

#include "costmodel/dtype.h"

namespace hetplan {

enum class Precision { kBf16, kFp8Delayed, kFp8Current, kFp8Blockwise, kMxfp8, kNvfp4 };
inline constexpr Precision kAllPrecisions[] = {Precision::kBf16,       Precision::kFp8Delayed,
                                               Precision::kFp8Current, Precision::kFp8Blockwise,
                                               Precision::kMxfp8,      Precision::kNvfp4};

std::string_view to_string(Precision p);
bool parse_precision(std::string_view text, Precision& out);

// The dtype a recipe's quantised GEMMs run in: fp8, fp4, or bf16 (no quantised GEMM).
Dtype quantized_dtype(Precision p);
inline bool is_quantized(Precision p) { return p != Precision::kBf16; }

// Bytes the quantisation of one bf16 tensor moves per element, in the kernels the recipe runs
// (the amax pass of current scaling and NVFP4's per-tensor scale included), quantising it in both
// orientations: row-wise for the GEMM that reads it as its A operand and column-wise (transposed,
// or with its blocks along the other dimension) for the other. `input_bytes` is the source
// element's size (2 for bf16).
double quantize_bytes_per_element(Precision p, double input_bytes = 2);
// Bytes per parameter of a quantised weight's low-precision copies (both orientations and their
// scales), kept from the step's first micro-batch to its last (TE caches them; Megatron-Core
// passes is_first_microbatch).
double weight_copy_bytes_per_element(Precision p);
// Bytes per element of a quantised linear layer's input as it is kept for the weight gradient:
// Transformer Engine saves the quantised copy its forward made (one orientation, with its
// scales; transformer_engine/pytorch/module/linear.py and layernorm_linear.py save the quantised
// inputmat / ln_out for backward), not the bf16 tensor. 0 for bf16 (the caller keeps its own).
double saved_input_bytes_per_element(Precision p);

}  // namespace hetplan
