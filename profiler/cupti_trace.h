// CUPTI activity tracing of measured regions: which kernels a measured operation ran, their device
// time, the idle time between them (launch overhead) and a cross-check of the CUDA-event timing.
// If CUPTI cannot start (no permission, another profiler attached, --no-cupti), tracing is
// unavailable, the reason goes into the provenance notes, and measurements go on without it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "costmodel/document.h"

namespace hetplan::profiler {

struct KernelSummary {
  std::string name;  // demangled, shortened to its first 200 characters
  int64_t count = 0;
  double total_s = 0;
};

// The kernels of one traced region of `launches` operations. The region is enqueued behind a
// StreamGate (profiler/stream_gate.h), so its kernels run back to back on the device whatever
// tracing costs the host per launch: event and span time the same device work.
struct TraceResult {
  int64_t launches = 0;
  int64_t kernel_count = 0;
  int64_t dropped_records = 0;
  bool gated = false;                  // the gate held until the whole region was enqueued
  double event_s = 0;                  // CUDA-event time of the whole region
  double kernel_s = 0;                 // sum of kernel durations
  double span_s = 0;                   // first kernel start to last kernel end
  std::vector<KernelSummary> kernels;  // by name, first seen first

  std::vector<std::string> names() const;
  // Relative disagreement of the two clocks on the same region: event_s / span_s - 1.
  double event_vs_cupti() const;
  // The `trace` object of a measurement; `timed_median_s` is the untraced median per operation.
  // "disagreement": the clocks differ by more than kTraceDisagreement on a gated region, or the
  // untraced median is that much shorter than the kernels' own time (one timer is wrong).
  // "launch_bound": the untraced median is that much longer than the span: the timing measured
  // the host's launch rate, not the device (tiny GEMMs).
  Json to_json(double timed_median_s) const;
};

// The relative difference beyond which two timings of the same work are said to disagree.
inline constexpr double kTraceDisagreement = 0.10;

class CuptiTracer {
 public:
  // Registers CUPTI's buffer callbacks; `enabled` false (--no-cupti) leaves it unavailable.
  explicit CuptiTracer(bool enabled);
  ~CuptiTracer();
  CuptiTracer(const CuptiTracer&) = delete;
  CuptiTracer& operator=(const CuptiTracer&) = delete;

  bool available() const { return available_; }
  const std::string& unavailable_reason() const { return reason_; }
  std::string version() const;

  // Runs `region` (which enqueues `launches` operations on `stream`) with kernel tracing on, waits
  // for it and returns what CUPTI recorded. Unavailable tracer or a CUPTI error: an empty result
  // and the tracer turns itself off (the reason is kept).
  TraceResult trace(const std::function<void()>& region, cudaStream_t stream, int64_t launches);

 private:
  bool available_ = false;
  std::string reason_;
};

}  // namespace hetplan::profiler
