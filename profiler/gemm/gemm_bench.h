// Measures cuBLASLt GEMMs: random inputs rotated through a pool larger than twice the L2, the
// output poisoned and checked against a reference before timing, CUDA-event timing of batches of
// launches, and a CUPTI trace of one batch. Shared by the grid and the layer GEMM sections.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "costmodel/calibration.h"
#include "profiler/common/gemm_plan.h"
#include "profiler/device.h"
#include "profiler/gemm/lt_gemm.h"
#include "profiler/section.h"

namespace hetplan::profiler {

class GemmBench {
 public:
  explicit GemmBench(const DeviceInfo& device);
  // Notes the largest input set per dtype among the GEMMs still to do (pools are sized once).
  void plan_pools(const std::vector<GemmCase>& todo);
  // Verifies, times and traces one GEMM. Throws GemmNotSupported or RuntimeFailure.
  GemmMeasurement measure(const GemmCase& c, SectionContext& ctx);

 private:
  // Random inputs of one storage type, at least `bytes` long.
  const DeviceBuffer& pool(Dtype storage, size_t bytes, cudaStream_t stream);

  int64_t l2_bytes_;
  LtHandle handle_;
  DeviceBuffer workspace_;
  DeviceBuffer scale_one_;
  DeviceBuffer output_;
  DeviceBuffer pool_;
  Dtype pool_dtype_ = Dtype::kFp32;
  std::map<Dtype, size_t> planned_pool_bytes_;
  uint64_t seed_ = 1;
};

// Bytes of one rotation set (op(A) and op(B), each 256-byte aligned) and how many sets make more
// than twice the L2.
size_t gemm_set_bytes(Dtype dtype, const GemmShape& shape);
int64_t rotation_sets(size_t set_bytes, int64_t l2_bytes);

}  // namespace hetplan::profiler
