// Times a GPU operation with CUDA events: warm-up launches, a pilot to size the batches, then
// samples of back-to-back launches between events recorded in one go (no host sync between
// samples, so the GPU never idles on the host). Each sample is a batch's time over its launch
// count; the distribution of those is what a calibration keeps.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <cuda_runtime_api.h>

#include "costmodel/clocks.h"
#include "costmodel/document.h"
#include "costmodel/stats.h"

namespace hetplan::profiler {

class ClockMonitor;

struct TimingOptions {
  double target_s = 20e-3;   // timed launches add up to at least this long
  double sample_s = 0.5e-3;  // one sample (a batch of launches) lasts at least this long
  int warmup_launches = 2;
  int min_samples = 5;
  int max_samples = 200;
  int max_launches_per_sample = 1000;
  // time_graph_launches: launches before the operation's inputs repeat (its rotation sets); a
  // captured batch holds at least this many (up to max_launches_per_sample), so that replaying
  // the batch still cycles through every input set and none stays in L2.
  int64_t rotation_launches = 1;
  // Read while the timed samples run (profiler/common/clock_monitor.h); null: not read.
  ClockMonitor* clocks = nullptr;
};

struct Timing {
  Distribution per_launch_s;  // over samples, each a batch mean
  int64_t launches_per_sample = 1;
  int64_t launches = 0;               // all launches made, warm-up and pilot included
  std::string timer = "cuda_events";  // or "cuda_graph"
  std::string graph_fallback;         // why a graph timing fell back to events ("" if it did not)
  ClockSummary clocks;                // the GPU's clock during the timed samples (empty: not read)
};

// Enqueues launch number `i` on the stream (i counts every launch, so the operation can rotate its
// input buffers).
using LaunchFn = std::function<void(int64_t i)>;

Timing time_launches(const LaunchFn& launch, cudaStream_t stream, const TimingOptions& options);

// The same with each sample a CUDA graph of the batch's launches, captured once and replayed:
// the device runs the launches back to back without the host's per-launch cost. For operations
// shorter than their launch (a cuBLASLt call costs the host 6.5-12 us; a small GEMM runs 2-3 us
// on the H100, measured 2026-11-23) event timing of eager launches measures the host's launch
// rate, which drifts during a calibration; this measures the device. If the launches cannot be
// captured, falls back to time_launches and says why in `graph_fallback`.
Timing time_graph_launches(const LaunchFn& launch, cudaStream_t stream,
                           const TimingOptions& options);
// {"samples", "launches_per_sample", "warmup_launches", "timer", "clocks" (where read)} for a
// measurement's `method`.
Json method_json(const Timing& t, const TimingOptions& options);

}  // namespace hetplan::profiler
