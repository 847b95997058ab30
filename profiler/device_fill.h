// Random device data for measurements: never zeros, never the same as the previous fill.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "costmodel/dtype.h"

namespace hetplan::profiler {

// Fills `count` elements of `dtype` at `data` with values uniform in [-scale, scale), from a hash
// of the index and `seed` (fp8 is e4m3; tf32 is stored as fp32).
void fill_uniform(void* data, int64_t count, Dtype dtype, uint64_t seed, float scale,
                  cudaStream_t stream);
// Storage bytes of one element of a GEMM's inputs and of its output (fp8 products write bf16).
int gemm_input_bytes(Dtype dtype);
int gemm_output_bytes(Dtype dtype);

}  // namespace hetplan::profiler
