#include "kernels/cuda_check.h"

#include <unistd.h>

#include <array>
#include <mutex>
#include <string>

namespace hetplan::kernels {

void throw_cuda_error(cudaError_t error, const char* call, const char* file, int line) {
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  int device = -1;
  cudaGetDevice(&device);
  throw KernelError(std::string(cudaGetErrorName(error)) + " (" + cudaGetErrorString(error) +
                    ") from " + call + " at " + file + ":" + std::to_string(line) + " on " + host +
                    ", device " + std::to_string(device));
}

int sm_count() {
  static std::mutex mutex;
  static std::array<int, 64> cache{};
  int device = 0;
  HETPLAN_CUDA_CHECK(cudaGetDevice(&device));
  std::lock_guard lock(mutex);
  int& n = cache.at(static_cast<size_t>(device));
  if (n == 0)
    HETPLAN_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device));
  return n;
}

int resident_blocks(const void* kernel, int block, size_t smem_bytes) {
  int blocks = 0;
  HETPLAN_CUDA_CHECK(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, block, smem_bytes));
  return blocks > 0 ? blocks : 1;
}

void allow_dynamic_smem(const void* kernel, size_t bytes) {
  if (bytes <= 48 * 1024) return;
  HETPLAN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(bytes)));
  // All of the unified L1/shared storage as shared memory, so that several such blocks fit per SM.
  HETPLAN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                          cudaSharedmemCarveoutMaxShared));
}

}  // namespace hetplan::kernels
