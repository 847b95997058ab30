#include "profiler/collectives/cuda_util.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "costmodel/errors.h"

namespace hetplan::profiler::coll {

std::string host_name() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown-host";
  return buf;
}

void throw_failure(const char* library, const char* call, const std::string& error,
                   const char* file, int line) {
  const char* base = std::strrchr(file, '/');
  throw RuntimeFailure(fmt::format("{} error in {} at {}:{} on {}: {}", library, call,
                                   base ? base + 1 : file, line, host_name(), error));
}

DeviceMemory::DeviceMemory(size_t bytes) : bytes_(bytes) {
  HP_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
}

DeviceMemory::~DeviceMemory() {
  if (ptr_) cudaFree(ptr_);
}

DeviceMemory& DeviceMemory::operator=(DeviceMemory&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

HostMemory::HostMemory(size_t bytes, bool pinned) : pinned_(pinned) {
  if (pinned) {
    HP_CUDA_CHECK(cudaMallocHost(&ptr_, bytes));
  } else {
    ptr_ = std::malloc(bytes);
    if (!ptr_) throw RuntimeFailure(fmt::format("cannot allocate {} bytes of host memory", bytes));
  }
  std::memset(ptr_, 1, bytes);  // touch every page: never time first-touch page faults
}

HostMemory::~HostMemory() {
  if (!ptr_) return;
  if (pinned_) {
    cudaFreeHost(ptr_);
  } else {
    std::free(ptr_);
  }
}

Stream::Stream() { HP_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
Stream::~Stream() {
  if (s_) cudaStreamDestroy(s_);
}

Event::Event() { HP_CUDA_CHECK(cudaEventCreate(&e_)); }
Event::~Event() {
  if (e_) cudaEventDestroy(e_);
}

double elapsed_s(const Event& start, const Event& stop) {
  float ms = 0;
  HP_CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
  return ms * 1e-3;
}

}  // namespace hetplan::profiler::coll
