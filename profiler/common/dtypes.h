// Which GEMM dtypes a GPU can run: the requested list (or all) minus what its compute capability
// lacks. bf16 and tf32 need Ampere (sm_80), fp8 needs Ada or Hopper (sm_89).
#pragma once

#include <string>
#include <vector>

#include "costmodel/dtype.h"

namespace hetplan::profiler {

// Dtypes to measure on a GPU of compute capability major.minor; `skipped` gets one line per
// requested dtype the GPU cannot run.
std::vector<Dtype> supported_dtypes(const std::vector<Dtype>& requested, int cc_major, int cc_minor,
                                    std::vector<std::string>* skipped);
// Parses "bf16,fp8" (throws InputError naming --dtypes).
std::vector<Dtype> parse_dtype_list(const std::string& text);

}  // namespace hetplan::profiler
