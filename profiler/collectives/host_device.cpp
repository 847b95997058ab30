#include "profiler/collectives/host_device.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

namespace hetplan::profiler::coll {
namespace {

// Sets the device first, so that members constructed after it live on that device.
int select(int device) {
  CUDA_CHECK(cudaSetDevice(device));
  return device;
}

void fill_bytes(void* p, size_t n, unsigned seed) {
  auto* b = static_cast<unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<unsigned char>((i * 131 + seed) >> 3);
}

}  // namespace

HostDeviceBench::HostDeviceBench(int device, size_t max_bytes)
    : device_(select(device)),
      max_bytes_(max_bytes),
      dev_(max_bytes, "the host-device copy buffer"),
      pinned_(std::make_unique<HostMemory>(max_bytes, true)),
      pageable_(std::make_unique<HostMemory>(max_bytes, false)),
      check_(std::make_unique<HostMemory>(max_bytes, false)) {}

HostDeviceMeasurement HostDeviceBench::measure(const std::string& direction, bool pinned,
                                               double bytes_wanted, const TimingPlan& plan) {
  CUDA_CHECK(cudaSetDevice(device_));
  const size_t bytes = std::min(static_cast<size_t>(bytes_wanted), max_bytes_);
  void* host = pinned ? pinned_->get() : pageable_->get();
  const bool h2d = direction == "h2d";
  cudaStream_t s = stream_.get();
  // Round trip first: what comes back must be what went out.
  fill_bytes(host, bytes, static_cast<unsigned>(bytes));
  CUDA_CHECK(cudaMemcpy(dev_.get(), host, bytes, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(check_->get(), dev_.get(), bytes, cudaMemcpyDeviceToHost));
  if (std::memcmp(check_->get(), host, bytes) != 0)
    throw RuntimeFailure(
        fmt::format("host-device round trip of {} bytes on GPU {} came back "
                    "different",
                    bytes, device_));
  void* dst = h2d ? dev_.get() : host;
  const void* src = h2d ? host : dev_.get();
  const cudaMemcpyKind kind = h2d ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
  auto copy = [&] {
    if (pinned) {
      CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, s));
    } else {
      CUDA_CHECK(cudaMemcpy(dst, src, bytes, kind));
    }
  };
  for (int i = 0; i < plan.warmup; ++i) copy();
  CUDA_CHECK(cudaStreamSynchronize(s));
  CudaEvent start, stop;
  auto batch = [&](int iterations) {
    if (pinned) {
      CUDA_CHECK(cudaEventRecord(start.get(), s));
      for (int i = 0; i < iterations; ++i) copy();
      CUDA_CHECK(cudaEventRecord(stop.get(), s));
      CUDA_CHECK(cudaEventSynchronize(stop.get()));
      return stop.seconds_since(start) / iterations;
    }
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iterations; ++i) copy();
    const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
    return dt.count() / iterations;
  };
  const double estimate = batch(1);
  const int iterations =
      std::clamp(static_cast<int>(std::ceil(plan.target_batch_s / std::max(estimate, 1e-9))), 1,
                 plan.max_iterations);
  std::vector<double> samples;
  for (int b = 0; b < plan.batches; ++b) samples.push_back(batch(iterations));
  HostDeviceMeasurement m;
  m.direction = direction;
  m.pinned = pinned;
  m.bytes = static_cast<double>(bytes);
  m.time_s = summarize(samples);
  m.GBps = m.bytes / m.time_s.median / 1e9;
  return m;
}

}  // namespace hetplan::profiler::coll
