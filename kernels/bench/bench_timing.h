// Timing of one kernel case at one shape with CUDA events: warm-up, instances rotated so that
// repeated runs do not find their inputs in L2, many samples, median.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <vector>

#include "costmodel/clocks.h"
#include "kernels/registry.h"

namespace hetplan::profiler {
class ClockMonitor;
}

namespace hetplan::kernels::bench {

struct TimingOptions {
  int max_samples = 40;          // stop after this many samples ...
  double max_seconds = 1.5;      // ... or after this much timed work
  double warmup_seconds = 0.05;  // at least one run of each instance first
  size_t rotate_bytes = 0;       // rotate instances until they hold this much (3 x L2)
  // Read while each sample runs (profiler/common/clock_monitor.h); null: not read.
  profiler::ClockMonitor* clocks = nullptr;
};

struct Timing {
  double median_s = 0, min_s = 0, max_s = 0;  // per run
  int samples = 0;
  int runs_per_sample = 0;
  int instances = 0;
  ClockSummary clocks;  // the GPU's clock over every timed sample (empty: not read)
};

// Times runs of the kernel rotating over `instances` (all of one case and shape) on `stream`.
Timing time_runs(std::vector<std::unique_ptr<Instance>>& instances, cudaStream_t stream,
                 const TimingOptions& options);

// RAII CUDA event and stream.
class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

}  // namespace hetplan::kernels::bench
