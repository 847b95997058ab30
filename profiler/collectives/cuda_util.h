// Error checks and RAII owners used by the collective sweep. NCCL_CHECK reports the call, NCCL's
// error text, file:line and host. (Private until the calibrate framework's profiler/cuda_check.h
// and profiler/device.h are merged; then these become thin aliases of those.)
#pragma once

#include <cstddef>
#include <string>

#include <cuda_runtime_api.h>
#include <nccl.h>

namespace hetplan::profiler::coll {

// This machine's host name.
std::string host_name();
// Throws RuntimeFailure "<library> error in <call> at <file>:<line> on <host>: <error>".
[[noreturn]] void throw_failure(const char* library, const char* call, const std::string& error,
                                const char* file, int line);

// Owns device memory on the device that was current at construction.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  explicit DeviceMemory(size_t bytes);
  ~DeviceMemory();
  DeviceMemory(DeviceMemory&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr; }
  DeviceMemory& operator=(DeviceMemory&& o) noexcept;
  DeviceMemory(const DeviceMemory&) = delete;
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

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

// Owns a non-blocking stream of the device current at construction.
class Stream {
 public:
  Stream();
  ~Stream();
  Stream(Stream&& o) noexcept : s_(o.s_) { o.s_ = nullptr; }
  Stream(const Stream&) = delete;
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

// Owns a timing event of the device current at construction.
class Event {
 public:
  Event();
  ~Event();
  Event(Event&& o) noexcept : e_(o.e_) { o.e_ = nullptr; }
  Event(const Event&) = delete;
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

// Seconds between two completed events.
double elapsed_s(const Event& start, const Event& stop);

}  // namespace hetplan::profiler::coll

#define HP_CUDA_CHECK(call)                                                                 \
  do {                                                                                      \
    const cudaError_t hp_err_ = (call);                                                     \
    if (hp_err_ != cudaSuccess)                                                             \
      ::hetplan::profiler::coll::throw_failure("CUDA", #call, cudaGetErrorString(hp_err_),  \
                                               __FILE__, __LINE__);                         \
  } while (0)

// For calls that may legitimately return ncclInProgress on a non-blocking communicator.
#define NCCL_CHECK(call)                                                                    \
  do {                                                                                      \
    const ncclResult_t hp_res_ = (call);                                                    \
    if (hp_res_ != ncclSuccess && hp_res_ != ncclInProgress)                                \
      ::hetplan::profiler::coll::throw_failure("NCCL", #call, ncclGetErrorString(hp_res_),  \
                                               __FILE__, __LINE__);                         \
  } while (0)
