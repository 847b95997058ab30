// Numeric formats of weights, activations and GEMM operands.
#pragma once

#include <string>
#include <string_view>

namespace hetplan {

enum class Dtype { kFp32, kTf32, kFp16, kBf16, kFp8 };

// Bytes per element in memory (tf32 is stored as fp32).
int dtype_bytes(Dtype dtype);
std::string_view to_string(Dtype dtype);
// Parses "fp32", "tf32", "fp16", "bf16", "fp8"; nullopt-like: returns false when unknown.
bool parse_dtype(std::string_view text, Dtype& out);
// All dtypes, for tables and help text.
constexpr Dtype kAllDtypes[] = {Dtype::kFp32, Dtype::kTf32, Dtype::kFp16, Dtype::kBf16,
                                Dtype::kFp8};

}  // namespace hetplan
