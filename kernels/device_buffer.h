// RAII device memory: a typed cudaMalloc'd array that frees itself, with copies to and from host.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>
#include <vector>

#include "kernels/cuda_check.h"

namespace hetplan::kernels {

template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t count) : count_(count) {
    if (count_ > 0) HETPLAN_CUDA_CHECK(cudaMalloc(&ptr_, bytes()));
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), count_(std::exchange(o.count_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      release();
      ptr_ = std::exchange(o.ptr_, nullptr);
      count_ = std::exchange(o.count_, 0);
    }
    return *this;
  }
  ~DeviceBuffer() { release(); }

  T* get() const { return ptr_; }
  size_t count() const { return count_; }
  size_t bytes() const { return count_ * sizeof(T); }

  void upload(const std::vector<T>& host) {
    if (host.size() != count_) throw KernelError("DeviceBuffer::upload: size mismatch");
    HETPLAN_CUDA_CHECK(cudaMemcpy(ptr_, host.data(), bytes(), cudaMemcpyHostToDevice));
  }
  // Synchronous copy of elements [first, first + n) (all when n is 0).
  std::vector<T> download(size_t first = 0, size_t n = 0) const {
    if (n == 0) n = count_ - first;
    std::vector<T> host(n);
    if (n > 0)
      HETPLAN_CUDA_CHECK(
          cudaMemcpy(host.data(), ptr_ + first, n * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
  // Sets every byte (0xff makes every fp32/bf16/fp16 element a NaN: the poison for outputs).
  void fill_bytes(int value) {
    if (count_ > 0) HETPLAN_CUDA_CHECK(cudaMemset(ptr_, value, bytes()));
  }

 private:
  void release() noexcept {
    if (ptr_) cudaFree(ptr_);
    ptr_ = nullptr;
    count_ = 0;
  }
  T* ptr_ = nullptr;
  size_t count_ = 0;
};

}  // namespace hetplan::kernels
