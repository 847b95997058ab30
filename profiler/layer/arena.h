// A bump allocator over one cudaMalloc: the layer benchmark's own caching allocator. Tensors are
// carved 256-byte aligned, in order; the arena counts the bytes asked for, so the activation
// memory a layer keeps is the sum of its saved tensors, exactly, and the cudaMemGetInfo change
// around the arena's one allocation cross-checks it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiler/device.h"

namespace hetplan::profiler {

class DeviceArena {
 public:
  // Layout pass: records a tensor of `bytes` and returns its offset.
  size_t reserve(size_t bytes);
  // Allocates the arena (reserve() first); returns the cudaMemGetInfo drop in free bytes.
  int64_t allocate(const std::string& what);
  // Address of a tensor reserved at `offset` (after allocate()).
  void* at(size_t offset) const { return static_cast<char*>(buffer_.get()) + offset; }
  // Sum of the bytes reserved (without alignment padding).
  int64_t requested_bytes() const { return requested_; }
  size_t size_bytes() const { return size_; }
  // Every tensor's [offset, bytes), for poisoning and checks.
  const std::vector<std::pair<size_t, size_t>>& tensors() const { return tensors_; }

 private:
  DeviceBuffer buffer_;
  size_t size_ = 0;
  int64_t requested_ = 0;
  std::vector<std::pair<size_t, size_t>> tensors_;
};

}  // namespace hetplan::profiler
