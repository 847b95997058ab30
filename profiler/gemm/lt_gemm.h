// One cuBLASLt matrix product as a framework issues it: descriptors for a dtype and shape, the
// algorithm cublasLtMatmulAlgoGetHeuristic ranks first under a 32 MiB workspace, and a launcher.
// Every cuBLASLt object is owned (RAII).
#pragma once

#include <memory>
#include <string>
#include <type_traits>

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "costmodel/calibration.h"

namespace hetplan::profiler {

inline constexpr size_t kGemmWorkspaceBytes = size_t{32} << 20;  // what PyTorch gives cuBLASLt

// Owns a cuBLASLt handle.
class LtHandle {
 public:
  LtHandle();
  ~LtHandle();
  LtHandle(const LtHandle&) = delete;
  LtHandle& operator=(const LtHandle&) = delete;
  cublasLtHandle_t get() const { return handle_; }
  // "13.0.2" from cublasLtGetVersion().
  static std::string version();

 private:
  cublasLtHandle_t handle_ = nullptr;
};

// Thrown when cuBLASLt offers no algorithm for a dtype and shape (a result, not a crash).
class GemmNotSupported : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Descriptors, chosen algorithm and launch of one GEMM:
//   bf16, fp16: inputs and output in that type, fp32 accumulation (CUBLAS_COMPUTE_32F)
//   fp32:       CUBLAS_COMPUTE_32F;  tf32: fp32 data, CUBLAS_COMPUTE_32F_FAST_TF32
//   fp8:        e4m3 inputs, bf16 output, fp32 accumulation, per-tensor scales of 1 (device
//               pointers, as Transformer Engine passes them); cuBLASLt needs TN for fp8.
class LtGemm {
 public:
  // `scale_one` is a device float holding 1.0 (fp8 scales); ignored for other dtypes. With
  // `bias_epilogue`, the product adds a bias vector of m values to every column (cuBLASLt's BIAS
  // epilogue, as frameworks fuse a Linear's bias); pass the bias to run().
  LtGemm(cublasLtHandle_t handle, Dtype dtype, const GemmShape& shape, const float* scale_one,
         bool bias_epilogue = false);
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  // C = op(A) op(B) (+ bias), alpha 1, beta 0. `workspace` holds kGemmWorkspaceBytes.
  void run(const void* a, const void* b, void* c, void* workspace, cudaStream_t stream,
           const void* bias = nullptr) const;
  // The chosen algorithm: ids, tile, split-K, stages, workspace, waves.
  Json algo_json() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hetplan::profiler
