// Numeric formats of weights, activations and GEMM operands.
#pragma once

#include <string>
#include <string_view>

namespace hetplan {

// fp8 is E4M3 / E5M2 (8 bits); fp4 NVIDIA's E2M1 (4 bits: two elements per byte), Blackwell's
// NVFP4 and MXFP4 GEMM operands.
enum class Dtype { kFp32, kTf32, kFp16, kBf16, kFp8, kFp4 };

// Bytes per element in memory (tf32 is stored as fp32; fp4 packs two elements into a byte: 0.5).
double dtype_bytes(Dtype dtype);
std::string_view to_string(Dtype dtype);
// Parses "fp32", "tf32", "fp16", "bf16", "fp8", "fp4"; returns false when unknown.
bool parse_dtype(std::string_view text, Dtype& out);
// The dtypes hetplan measures (calibration sweeps, `calibrate --dtypes`): fp4 has datasheet peaks
// and GEMM priors only (no GPU hetplan has calibrated runs it).
constexpr Dtype kAllDtypes[] = {Dtype::kFp32, Dtype::kTf32, Dtype::kFp16, Dtype::kBf16,
                                Dtype::kFp8};
// Every dtype, fp4 included (GPU peaks, cost models, what files may name).
constexpr Dtype kEveryDtype[] = {Dtype::kFp32, Dtype::kTf32, Dtype::kFp16,
                                 Dtype::kBf16, Dtype::kFp8,  Dtype::kFp4};

}  // namespace hetplan
