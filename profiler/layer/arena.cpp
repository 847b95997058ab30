#include "profiler/layer/arena.h"

namespace hetplan::profiler {

size_t DeviceArena::reserve(size_t bytes) {
  constexpr size_t kAlign = 256;
  const size_t offset = size_;
  size_ += (bytes + kAlign - 1) / kAlign * kAlign;
  requested_ += static_cast<int64_t>(bytes);
  tensors_.emplace_back(offset, bytes);
  return offset;
}

int64_t DeviceArena::allocate(const std::string& what) {
  const int64_t before = device_memory().free_bytes;
  buffer_ = DeviceBuffer(size_, what);
  return before - device_memory().free_bytes;
}

}  // namespace hetplan::profiler
