#include "profiler/collectives/cuda_util.h"

#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "costmodel/errors.h"

namespace hetplan::profiler::coll {

HostMemory::HostMemory(size_t bytes, bool pinned) : pinned_(pinned) {
  if (pinned) {
    CUDA_CHECK(cudaMallocHost(&ptr_, bytes));
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

}  // namespace hetplan::profiler::coll
