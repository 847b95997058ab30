// The GPU a calibration runs on, and RAII owners of device memory, events and streams.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <cuda_runtime_api.h>

namespace hetplan::profiler {

// What the driver reports about one GPU.
struct DeviceInfo {
  int index = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int64_t sm_clock_mhz = 0;      // peak (boost) clock
  int64_t memory_clock_mhz = 0;  // peak
  int64_t memory_bus_bits = 0;
  int64_t memory_bytes = 0;
  int64_t l2_bytes = 0;
  std::string pci_bus_id;
  int driver_version = 0;   // e.g. 13000 for 13.0
  int runtime_version = 0;  // the CUDA runtime hetplan was linked with

  // fp8 (e4m3) tensor-core GEMMs: Ada (sm_89) and later.
  bool has_fp8() const { return cc_major * 10 + cc_minor >= 89; }
  // bf16 and tf32 tensor cores: Ampere (sm_80) and later.
  bool has_bf16() const { return cc_major >= 8; }
};

// Number of visible GPUs. Throws RuntimeFailure with a plain explanation when there is no GPU or
// no usable driver (the usual message on a machine without one), never crashes.
int visible_device_count();
// Reads a device's properties (does not select it).
DeviceInfo query_device(int index);
// "13.0" from 13000.
std::string cuda_version_text(int version);

// Owns a stream on the selected device.
class CudaStream {
 public:
  CudaStream();
  ~CudaStream();
  CudaStream(CudaStream&& o) noexcept : stream_(o.stream_) { o.stream_ = nullptr; }
  CudaStream& operator=(CudaStream&&) = delete;
  CudaStream(const CudaStream&) = delete;
  cudaStream_t get() const { return stream_; }
  void synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
};

// Owns a timing event.
class CudaEvent {
 public:
  CudaEvent();
  ~CudaEvent();
  CudaEvent(CudaEvent&& o) noexcept : event_(o.event_) { o.event_ = nullptr; }
  CudaEvent& operator=(CudaEvent&&) = delete;
  CudaEvent(const CudaEvent&) = delete;
  cudaEvent_t get() const { return event_; }
  void record(cudaStream_t stream) const;
  // Seconds from `start` to this event (both recorded and complete).
  double seconds_since(const CudaEvent& start) const;

 private:
  cudaEvent_t event_ = nullptr;
};

// Owns device memory. Allocations of 64 MiB and more first check the free memory, so that a
// shape too large for this GPU fails with a clear message instead of a bare out-of-memory.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(size_t bytes, const std::string& what);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) {
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }
  explicit operator bool() const { return ptr_ != nullptr; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Free and total memory of the selected device.
struct MemoryInfo {
  int64_t free_bytes = 0;
  int64_t total_bytes = 0;
};
MemoryInfo device_memory();
// Throws RuntimeFailure when fewer than `bytes` (plus a 256 MiB margin for libraries) are free.
void require_free_memory(int64_t bytes, const std::string& what);
// "1.5 GiB", "512 MiB".
std::string bytes_text(double bytes);

// The device a calibration uses: selected at construction, with its properties and a stream.
class DeviceContext {
 public:
  explicit DeviceContext(int index);
  const DeviceInfo& info() const { return info_; }
  cudaStream_t stream() const { return stream_.get(); }

 private:
  DeviceInfo info_;
  CudaStream stream_;
};

}  // namespace hetplan::profiler
