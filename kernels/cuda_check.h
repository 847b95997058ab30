// Error checking for CUDA calls: every failure throws KernelError naming the call, file:line,
// host and device. Launchers check the launch itself (cudaGetLastError) and never synchronize.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>

#include "kernels/launch_shape.h"

namespace hetplan::kernels {

// A CUDA call failed. Carries the message; the profiler turns it into its own error type.
class KernelError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] void throw_cuda_error(cudaError_t error, const char* call, const char* file, int line);

// Multiprocessors of the current device (cached per device).
int sm_count();

// Blocks of `block` threads with `smem_bytes` of dynamic shared memory that fit on one SM at
// once (the occupancy calculator, which counts the kernel's registers); at least 1.
int resident_blocks(const void* kernel, int block, size_t smem_bytes);

// Raises a kernel's dynamic shared-memory limit when `bytes` is over the 48 KB default (and
// prefers the largest shared-memory carveout for it).
void allow_dynamic_smem(const void* kernel, size_t bytes);

inline dim3 grid_of(const LaunchShape& s) {
  return dim3(static_cast<unsigned>(s.grid_x), static_cast<unsigned>(s.grid_y),
              static_cast<unsigned>(s.grid_z));
}

}  // namespace hetplan::kernels

#define HETPLAN_CUDA_CHECK(call)                                                     \
  do {                                                                               \
    const cudaError_t hetplan_err_ = (call);                                         \
    if (hetplan_err_ != cudaSuccess)                                                 \
      ::hetplan::kernels::throw_cuda_error(hetplan_err_, #call, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: reports a bad configuration at once (does not wait for the kernel).
#define HETPLAN_CHECK_LAUNCH() HETPLAN_CUDA_CHECK(cudaGetLastError())
