// Checks for CUDA, cuBLAS(Lt) and CUPTI calls. A failed call throws hetplan::RuntimeFailure whose
// message names the call, the library's error text, file:line, the host and (under MPI or Slurm)
// the rank; cli/ turns it into exit status 1. NCCL_CHECK (profiler/collectives) uses the same
// throw_check_failure.
#pragma once

#include <string>

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cupti_result.h>

namespace hetplan::profiler {

// This machine's host name.
std::string host_name();
// The process's rank from the launcher's environment (OMPI_COMM_WORLD_RANK, PMI_RANK,
// SLURM_PROCID), or -1 when not launched as one of several ranks.
int launcher_rank();
// "host gpu7" or "host gpu7, rank 3".
std::string where_text();

// Throws RuntimeFailure: "<library> error in <call> at <file>:<line> on <where>: <error>".
[[noreturn]] void throw_check_failure(const char* library, const char* call,
                                      const std::string& error, const char* file, int line);
std::string cupti_error_text(CUptiResult result);

}  // namespace hetplan::profiler

#define CUDA_CHECK(call)                                                                        \
  do {                                                                                          \
    const cudaError_t hetplan_err_ = (call);                                                    \
    if (hetplan_err_ != cudaSuccess)                                                            \
      ::hetplan::profiler::throw_check_failure("CUDA", #call, cudaGetErrorString(hetplan_err_), \
                                               __FILE__, __LINE__);                             \
  } while (0)

// After a kernel launch: reports launch-configuration errors at the launch site.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

#define CUBLAS_CHECK(call)                                                            \
  do {                                                                                \
    const cublasStatus_t hetplan_st_ = (call);                                        \
    if (hetplan_st_ != CUBLAS_STATUS_SUCCESS)                                         \
      ::hetplan::profiler::throw_check_failure(                                       \
          "cuBLAS", #call, cublasLtGetStatusString(hetplan_st_), __FILE__, __LINE__); \
  } while (0)

#define CUPTI_CHECK(call)                                                                          \
  do {                                                                                             \
    const CUptiResult hetplan_cr_ = (call);                                                        \
    if (hetplan_cr_ != CUPTI_SUCCESS)                                                              \
      ::hetplan::profiler::throw_check_failure(                                                    \
          "CUPTI", #call, ::hetplan::profiler::cupti_error_text(hetplan_cr_), __FILE__, __LINE__); \
  } while (0)
