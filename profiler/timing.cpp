#include "profiler/timing.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "profiler/cuda_check.h"
#include "profiler/device.h"

namespace hetplan::profiler {
namespace {

// Seconds per launch over `n` back-to-back launches starting at launch number `first`.
double time_batch(const LaunchFn& launch, cudaStream_t stream, int64_t first, int64_t n) {
  CudaEvent start, stop;
  start.record(stream);
  for (int64_t i = 0; i < n; ++i) launch(first + i);
  stop.record(stream);
  CUDA_CHECK(cudaEventSynchronize(stop.get()));
  return stop.seconds_since(start) / static_cast<double>(n);
}

}  // namespace

Timing time_launches(const LaunchFn& launch, cudaStream_t stream, const TimingOptions& o) {
  Timing t;
  int64_t next = 0;
  for (int i = 0; i < o.warmup_launches; ++i) launch(next++);
  CUDA_CHECK(cudaStreamSynchronize(stream));

  // Pilot: one launch, or twenty when one is too short to time well.
  double per_launch = time_batch(launch, stream, next, 1);
  next += 1;
  if (per_launch < 50e-6) {
    per_launch = time_batch(launch, stream, next, 20);
    next += 20;
  }
  per_launch = std::max(per_launch, 1e-7);

  const auto L = static_cast<int64_t>(
      std::clamp(std::ceil(o.sample_s / per_launch), 1.0, double(o.max_launches_per_sample)));
  const auto S = static_cast<int64_t>(std::clamp(std::ceil(o.target_s / (per_launch * L)),
                                                 double(o.min_samples), double(o.max_samples)));
  std::vector<CudaEvent> events(static_cast<size_t>(S + 1));
  events[0].record(stream);
  for (int64_t s = 0; s < S; ++s) {
    for (int64_t i = 0; i < L; ++i) launch(next++);
    events[static_cast<size_t>(s + 1)].record(stream);
  }
  CUDA_CHECK(cudaEventSynchronize(events.back().get()));
  std::vector<double> samples;
  samples.reserve(static_cast<size_t>(S));
  for (int64_t s = 0; s < S; ++s)
    samples.push_back(
        events[static_cast<size_t>(s + 1)].seconds_since(events[static_cast<size_t>(s)]) /
        static_cast<double>(L));
  t.per_launch_s = summarize(std::move(samples));
  t.launches_per_sample = L;
  t.launches = next;
  return t;
}

Json method_json(const Timing& t, const TimingOptions& o) {
  return Json{{"samples", t.per_launch_s.count},
              {"launches_per_sample", t.launches_per_sample},
              {"warmup_launches", o.warmup_launches},
              {"timer", "cuda_events"}};
}

}  // namespace hetplan::profiler
