#include "profiler/stream_gate.h"

#include <atomic>

#include "profiler/cuda_check.h"

namespace hetplan::profiler {
namespace {

__device__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Spins until the host sets flags[0] or `timeout_ns` passes; then records which in flags[1].
__global__ void hold_stream_kernel(volatile int* flags, uint64_t timeout_ns) {
  const uint64_t start = global_ns();
  while (flags[0] == 0) {
    if (global_ns() - start > timeout_ns) {
      flags[1] = 1;
      return;
    }
    __nanosleep(1000);
  }
}

}  // namespace

StreamGate::StreamGate(cudaStream_t stream, double timeout_s) : stream_(stream) {
  void* host = nullptr;
  CUDA_CHECK(cudaHostAlloc(&host, 2 * sizeof(int), cudaHostAllocMapped));
  flags_ = static_cast<volatile int*>(host);
  flags_[0] = 0;
  flags_[1] = 0;
  void* device = nullptr;
  CUDA_CHECK(cudaHostGetDevicePointer(&device, host, 0));
  hold_stream_kernel<<<1, 1, 0, stream_>>>(static_cast<volatile int*>(device),
                                           static_cast<uint64_t>(timeout_s * 1e9));
  const cudaError_t launched = cudaGetLastError();
  if (launched != cudaSuccess) {
    (void)cudaFreeHost(host);
    CUDA_CHECK(launched);
  }
}

StreamGate::~StreamGate() {
  open();
  // Freeing pinned memory synchronises the device; wait for the stream first all the same, so
  // that the gate never reads freed memory.
  (void)cudaStreamSynchronize(stream_);
  (void)cudaFreeHost(const_cast<int*>(flags_));
}

void StreamGate::open() {
  if (opened_) return;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  flags_[0] = 1;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  opened_ = true;
}

bool StreamGate::expired() const { return flags_[1] != 0; }

}  // namespace hetplan::profiler
