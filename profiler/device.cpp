#include "profiler/device.h"

#include <fmt/format.h>

#include "costmodel/errors.h"
#include "profiler/cuda_check.h"

namespace hetplan::profiler {

int visible_device_count() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    const std::string why = err != cudaSuccess ? cudaGetErrorString(err) : "no device visible";
    (void)cudaGetLastError();  // clear the sticky error for later calls
    throw RuntimeFailure(fmt::format(
        "no usable NVIDIA GPU on {} ({}). `hetplan calibrate` measures a GPU: run it on a GPU "
        "node with the NVIDIA driver loaded (check `nvidia-smi` and CUDA_VISIBLE_DEVICES)",
        where_text(), why));
  }
  return count;
}

std::string cuda_version_text(int version) {
  return fmt::format("{}.{}", version / 1000, (version % 1000) / 10);
}

DeviceInfo query_device(int index) {
  const int count = visible_device_count();
  if (index < 0 || index >= count)
    throw InputError(fmt::format("--device {}: this machine shows {} GPU(s), numbered 0 to {}",
                                 index, count, count - 1));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  DeviceInfo d;
  d.index = index;
  d.name = prop.name;
  d.cc_major = prop.major;
  d.cc_minor = prop.minor;
  d.sm_count = prop.multiProcessorCount;
  int khz = 0;
  // Clock rates left cudaDeviceProp in CUDA 13; the attributes remain.
  CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, index));
  d.sm_clock_mhz = khz / 1000;
  CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, index));
  d.memory_clock_mhz = khz / 1000;
  d.memory_bus_bits = prop.memoryBusWidth;
  d.memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  d.l2_bytes = prop.l2CacheSize;
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof(bus), index) == cudaSuccess) d.pci_bus_id = bus;
  CUDA_CHECK(cudaDriverGetVersion(&d.driver_version));
  CUDA_CHECK(cudaRuntimeGetVersion(&d.runtime_version));
  return d;
}

CudaStream::CudaStream() { CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }

CudaStream::~CudaStream() {
  if (stream_) cudaStreamDestroy(stream_);
}

void CudaStream::synchronize() const { CUDA_CHECK(cudaStreamSynchronize(stream_)); }

CudaEvent::CudaEvent() { CUDA_CHECK(cudaEventCreate(&event_)); }

CudaEvent::~CudaEvent() {
  if (event_) cudaEventDestroy(event_);
}

void CudaEvent::record(cudaStream_t stream) const { CUDA_CHECK(cudaEventRecord(event_, stream)); }

double CudaEvent::seconds_since(const CudaEvent& start) const {
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, event_));
  return static_cast<double>(ms) * 1e-3;
}

std::string bytes_text(double bytes) {
  if (bytes >= double(1 << 30)) return fmt::format("{:.2f} GiB", bytes / double(1 << 30));
  if (bytes >= double(1 << 20)) return fmt::format("{:.1f} MiB", bytes / double(1 << 20));
  if (bytes >= 1024) return fmt::format("{:.1f} KiB", bytes / 1024);
  return fmt::format("{:.0f} B", bytes);
}

MemoryInfo device_memory() {
  size_t free_b = 0, total_b = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  return {static_cast<int64_t>(free_b), static_cast<int64_t>(total_b)};
}

void require_free_memory(int64_t bytes, const std::string& what) {
  constexpr int64_t kMargin = int64_t{256} << 20;
  const MemoryInfo m = device_memory();
  if (bytes + kMargin > m.free_bytes)
    throw RuntimeFailure(fmt::format("not enough GPU memory for {}: needs {}, {} free of {}", what,
                                     bytes_text(double(bytes)), bytes_text(double(m.free_bytes)),
                                     bytes_text(double(m.total_bytes))));
}

DeviceBuffer::DeviceBuffer(size_t bytes, const std::string& what) : bytes_(bytes) {
  if (bytes == 0) return;
  constexpr size_t kCheckAbove = size_t{64} << 20;
  if (bytes >= kCheckAbove) require_free_memory(static_cast<int64_t>(bytes), what);
  const cudaError_t err = cudaMalloc(&ptr_, bytes);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    ptr_ = nullptr;
    throw RuntimeFailure(fmt::format("cudaMalloc of {} for {} failed on {}: {}",
                                     bytes_text(double(bytes)), what, where_text(),
                                     cudaGetErrorString(err)));
  }
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

DeviceContext::DeviceContext(int index)
    : info_(query_device(index)), stream_([&] {
        CUDA_CHECK(cudaSetDevice(index));
        return CudaStream();
      }()) {}

}  // namespace hetplan::profiler
