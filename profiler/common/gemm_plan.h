// GEMM sweeps: the generic grid of shapes (log-spaced M, N, K, from skinny to large) and the
// plan items of one GEMM. The layer sweep (layer_plan.h) produces items of the same form.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "costmodel/calibration.h"
#include "profiler/common/plan.h"

namespace hetplan::profiler {

struct GemmCase {
  Dtype dtype = Dtype::kBf16;
  GemmShape shape;
  std::string origin = "grid";
};

// Sizes from `lo` to `hi` (powers of two): every power of two, and with `half_steps` the 1.5x
// point between two powers (16, 24, 32, 48, ...).
std::vector<int64_t> log_sizes(int64_t lo, int64_t hi, bool half_steps);

// The generic grid, per dtype (see docs/calibrate.md for the reasoning):
//   full:  bf16 M in 16..16384 with 1.5x steps (21 sizes), N and K powers of two 16..16384 (11);
//          fp16, fp8, tf32 and fp32 M and N powers of two, K powers of four 16..16384 (6);
//          plus bf16 NN and NT layouts on a 256..16384 power-of-four cube;
//   quick: bf16 M, N, K in {16, 128, 1024, 8192}; other dtypes {128, 1024, 8192}.
// All TN (op(A) transposed: A stored k x m), the layout of a framework's forward GEMM and the one
// cuBLASLt fp8 requires. Shapes over a dtype's FLOP cap are left out (fp32 at 16384^3 alone would
// take seconds).
std::vector<GemmCase> gemm_grid(bool quick, const std::vector<Dtype>& dtypes);

// Journal key: "gemm/bf16/4096x4096x4096x1/TN" (m x n x k x batch, then op(A) op(B)).
std::string gemm_key(Dtype dtype, const GemmShape& shape);
// Human label for the progress line: "bf16 4096x4096x4096 TN".
std::string gemm_label(Dtype dtype, const GemmShape& shape);
// The same without the dtype: "4096x4096x4096 TN" ("... x8 TN" for a batch of 8).
std::string gemm_shape_label(const GemmShape& shape);
// Expected seconds to verify and time one shape on an H100 (for the plan and the ETA only).
double estimate_gemm_s(Dtype dtype, const GemmShape& shape, bool quick);
// Bytes of op(A) + op(B) + C for one product (the minimum memory traffic).
double gemm_bytes(Dtype dtype, const GemmShape& shape);

// Plan items of the given cases in section `section`, deduplicated by key (cases that share a
// key keep the first case's origin and list every origin in spec "origins").
std::vector<PlanItem> gemm_items(const std::vector<GemmCase>& cases, const std::string& section,
                                 bool quick);
// Reads a case back from a plan item's spec.
GemmCase gemm_case_from_spec(const Json& spec);

// Timing effort per shape: the timed repetitions add up to at least this long.
double gemm_timing_target_s(bool quick);

}  // namespace hetplan::profiler
