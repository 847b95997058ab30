// Checks a GEMM's output against a reference computed on the GPU in double precision from the
// same inputs, on a sample of output elements (all of them for small outputs).
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "costmodel/dtype.h"

namespace hetplan::profiler {

// A GEMM's dimensions as cuBLAS sees them (C++17: this header is compiled by nvcc).
struct GemmDims {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  bool trans_a = false, trans_b = false;
};

struct GemmCheck {
  int64_t samples = 0;
  double relative_error = 0;  // ||out - ref|| / ||ref|| over the samples; inf if any NaN
  double threshold = 0;
  bool passed = false;
};

// Relative-error threshold per dtype: fp32 1e-4; tf32, fp16 5e-3; bf16, fp8 (bf16 output) 2e-2.
double gemm_check_threshold(Dtype dtype);

// Compares C (column-major, ldc = m; per batch a stride of m*n) with the reference product of
// op(A) op(B) (the layouts of cuBLAS: A is k x m when trans_a, else m x k; B is n x k when
// trans_b, else k x n). Synchronises `stream`.
GemmCheck check_gemm(Dtype dtype, const GemmDims& shape, const void* a, const void* b,
                     const void* c, cudaStream_t stream, int64_t max_samples = 512);

}  // namespace hetplan::profiler
