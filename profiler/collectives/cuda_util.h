// What the collective sweep needs beyond profiler/device.h and profiler/cuda_check.h (whose
// CUDA_CHECK, DeviceBuffer, CudaStream and CudaEvent it uses): host memory, pinned or pageable, and
// NCCL_CHECK, which reports the call, NCCL's error text, file:line, host and rank as CUDA_CHECK
// does.
#pragma once

#include <cstddef>

#include <nccl.h>

#include "profiler/cuda_check.h"
#include "profiler/device.h"

namespace hetplan::profiler::coll {

// Owns host memory: pinned (cudaMallocHost) or pageable (touched, so its pages exist).
class HostMemory {
 public:
  HostMemory(size_t bytes, bool pinned);
  ~HostMemory();
  HostMemory(const HostMemory&) = delete;
  HostMemory& operator=(const HostMemory&) = delete;
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
  bool pinned_ = false;
};

}  // namespace hetplan::profiler::coll

// For calls that may legitimately return ncclInProgress on a non-blocking communicator.
#define NCCL_CHECK(call)                                                                   \
  do {                                                                                     \
    const ncclResult_t hp_res_ = (call);                                                   \
    if (hp_res_ != ncclSuccess && hp_res_ != ncclInProgress)                               \
      ::hetplan::profiler::throw_check_failure("NCCL", #call, ncclGetErrorString(hp_res_), \
                                               __FILE__, __LINE__);                        \
  } while (0)
