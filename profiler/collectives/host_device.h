// Host-device copy bandwidth of one GPU: pinned (cudaMallocHost, asynchronous copies timed with
// CUDA events) and pageable (malloc, synchronous cudaMemcpy timed on the host clock, since the
// driver stages those through its own pinned buffers), both directions.
#pragma once

#include <memory>
#include <string>

#include "costmodel/calibration.h"
#include "profiler/collectives/cuda_util.h"
#include "profiler/collectives/harness.h"

namespace hetplan::profiler::coll {

class HostDeviceBench {
 public:
  // Buffers of `max_bytes` on `device` and on the host.
  HostDeviceBench(int device, size_t max_bytes);
  // One direction ("h2d" or "d2h"), host memory kind and size. Checks a round trip first.
  HostDeviceMeasurement measure(const std::string& direction, bool pinned, double bytes,
                                const TimingPlan& plan);

 private:
  int device_;
  size_t max_bytes_;
  DeviceBuffer dev_;
  std::unique_ptr<HostMemory> pinned_, pageable_, check_;
  CudaStream stream_;
};

}  // namespace hetplan::profiler::coll
