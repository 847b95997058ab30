// Times a GPU operation with CUDA events: warm-up launches, a pilot to size the batches, then
// samples of back-to-back launches between events recorded in one go (no host sync between
// samples, so the GPU never idles on the host). Each sample is a batch's time over its launch
// count; the distribution of those is what a calibration keeps.
#pragma once

#include <cstdint>
#include <functional>

#include <cuda_runtime_api.h>

#include "costmodel/document.h"
#include "costmodel/stats.h"

namespace hetplan::profiler {

struct TimingOptions {
  double target_s = 20e-3;   // timed launches add up to at least this long
  double sample_s = 0.5e-3;  // one sample (a batch of launches) lasts at least this long
  int warmup_launches = 2;
  int min_samples = 5;
  int max_samples = 200;
  int max_launches_per_sample = 1000;
};

struct Timing {
  Distribution per_launch_s;  // over samples, each a batch mean
  int64_t launches_per_sample = 1;
  int64_t launches = 0;  // all launches made, warm-up and pilot included
};

// Enqueues launch number `i` on the stream (i counts every launch, so the operation can rotate its
// input buffers).
using LaunchFn = std::function<void(int64_t i)>;

Timing time_launches(const LaunchFn& launch, cudaStream_t stream, const TimingOptions& options);
// {"samples", "launches_per_sample", "warmup_launches"} for a measurement's `method`.
Json method_json(const Timing& t, const TimingOptions& options);

}  // namespace hetplan::profiler
