// Hardware counters per kernel launch through CUPTI's range profiler (cupti_range_profiler.h and
// cupti_profiler_host.h, CUDA 12.6+): auto ranges (one range per kernel launch) with kernel
// replay (CUPTI reruns each launch once per pass, saving and restoring device memory), so that
// any number of metrics can be read from one call of the region.
//
// Written without a GPU at hand (2026-11-23): the call sequence follows NVIDIA's range_profiling
// sample; which calls and metric names hold on an H100 is in the report of that session and
// docs/kernels.md "Hardware counters of our kernels".
#pragma once

#include <cuda.h>

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "profiler/metrics/metric_catalog.h"
#include "profiler/metrics/metrics_report.h"

namespace hetplan::profiler::metrics {

// A CUPTI call failed; `status` says how (restricted, unsupported, failed) and which call.
class CuptiFailure : public std::runtime_error {
 public:
  explicit CuptiFailure(CounterStatus s);
  CounterStatus status;
};

// The current CUDA context (the runtime's primary one after cudaFree(0)), or nullptr.
CUcontext current_context();

// "13.0.1" style text of cuptiGetVersion's API number (130001), or "".
std::string cupti_version_text();

class RangeProfiler {
 public:
  // Initialises the profiler API for `device` (whose primary context `ctx` is current), reads the
  // chip name and the counter availability. Throws CuptiFailure.
  RangeProfiler(int device, CUcontext ctx);
  ~RangeProfiler();
  RangeProfiler(const RangeProfiler&) = delete;
  RangeProfiler& operator=(const RangeProfiler&) = delete;

  const std::string& chip() const { return chip_; }

  // Resolves each spec to the first candidate name the chip accepts and builds the configuration
  // of the accepted ones. Throws CuptiFailure when none is accepted or the configuration fails.
  std::vector<ResolvedMetric> configure(const std::vector<MetricSpec>& specs);
  size_t passes() const { return passes_; }

  // Runs `region` (which launches kernels on this context and waits for them) under the profiler
  // and returns one LaunchMetrics per kernel launch, keyed by the configured metrics' keys.
  // Throws CuptiFailure.
  std::vector<LaunchMetrics> profile(const std::function<void()>& region);

 private:
  int device_;
  CUcontext ctx_;
  std::string chip_;
  std::vector<uint8_t> availability_;
  std::vector<ResolvedMetric> resolved_;
  std::vector<std::string> names_;
  std::vector<uint8_t> config_;
  size_t passes_ = 0;
  bool initialized_ = false;
};

}  // namespace hetplan::profiler::metrics
