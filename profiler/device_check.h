// Checks of measured outputs on the device: every element written (outputs are poisoned with NaN
// first) and finite, and not all zero.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "costmodel/dtype.h"

namespace hetplan::profiler {

struct ValueCounts {
  int64_t nonfinite = 0;
  int64_t zeros = 0;
  int64_t count = 0;
};

// Counts NaN/Inf and zero elements of `count` values of `dtype` (fp32, bf16 or fp16). Synchronises.
ValueCounts count_values(const void* data, int64_t count, Dtype dtype, cudaStream_t stream);

}  // namespace hetplan::profiler
