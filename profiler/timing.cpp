#include "profiler/timing.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "profiler/common/clock_monitor.h"
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

// Warm-up launches, then a pilot: seconds per launch of one launch, or of twenty when one is too
// short to time well. `next` counts the launches made.
double warm_up_and_pilot(const LaunchFn& launch, cudaStream_t stream, const TimingOptions& o,
                         int64_t& next) {
  for (int i = 0; i < o.warmup_launches; ++i) launch(next++);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  double per_launch = time_batch(launch, stream, next, 1);
  next += 1;
  if (per_launch < 50e-6) {
    per_launch = time_batch(launch, stream, next, 20);
    next += 20;
  }
  return std::max(per_launch, 1e-7);
}

// `samples` batches of `per_sample` launches each, enqueued by `batch` between events recorded in
// one go (no host synchronisation between samples); the distribution of seconds per launch. With
// `clocks`, the host reads the GPU's clock while it waits for the last event, into `*seen`.
Distribution sample_batches(const std::function<void()>& batch, cudaStream_t stream,
                            int64_t samples, int64_t per_sample, ClockMonitor* clocks = nullptr,
                            ClockSummary* seen = nullptr) {
  std::vector<CudaEvent> events(static_cast<size_t>(samples + 1));
  events[0].record(stream);
  for (int64_t s = 0; s < samples; ++s) {
    batch();
    events[static_cast<size_t>(s + 1)].record(stream);
  }
  if (clocks && seen) {
    const cudaEvent_t last = events.back().get();
    *seen = clocks->watch([last] { return cudaEventQuery(last) == cudaErrorNotReady; });
  }
  CUDA_CHECK(cudaEventSynchronize(events.back().get()));
  std::vector<double> out;
  out.reserve(static_cast<size_t>(samples));
  for (int64_t s = 0; s < samples; ++s)
    out.push_back(events[static_cast<size_t>(s + 1)].seconds_since(events[static_cast<size_t>(s)]) /
                  static_cast<double>(per_sample));
  return summarize(std::move(out));
}

int64_t sample_count(const TimingOptions& o, double batch_s) {
  return static_cast<int64_t>(std::clamp(std::ceil(o.target_s / std::max(batch_s, 1e-7)),
                                         double(o.min_samples), double(o.max_samples)));
}

}  // namespace

Timing time_launches(const LaunchFn& launch, cudaStream_t stream, const TimingOptions& o) {
  Timing t;
  int64_t next = 0;
  const double per_launch = warm_up_and_pilot(launch, stream, o, next);
  const auto L = static_cast<int64_t>(
      std::clamp(std::ceil(o.sample_s / per_launch), 1.0, double(o.max_launches_per_sample)));
  const int64_t S = sample_count(o, per_launch * static_cast<double>(L));
  t.per_launch_s = sample_batches(
      [&] {
        for (int64_t i = 0; i < L; ++i) launch(next++);
      },
      stream, S, L, o.clocks, &t.clocks);
  t.launches_per_sample = L;
  t.launches = next;
  return t;
}

namespace {

// A captured graph and its executable, destroyed on every way out.
struct CapturedGraph {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  CapturedGraph() = default;
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;
  ~CapturedGraph() {
    if (exec) (void)cudaGraphExecDestroy(exec);
    if (graph) (void)cudaGraphDestroy(graph);
  }
};

// Captures launches first .. first + n - 1 into `g`. Returns "" or why it could not.
std::string capture(const LaunchFn& launch, cudaStream_t stream, int64_t first, int64_t n,
                    CapturedGraph& g) {
  cudaError_t e = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
  if (e != cudaSuccess) return std::string("begin capture: ") + cudaGetErrorString(e);
  std::string failed;
  try {
    for (int64_t i = 0; i < n; ++i) launch(first + i);
  } catch (const std::exception& ex) {
    failed = ex.what();
  }
  e = cudaStreamEndCapture(stream, &g.graph);  // ends the capture on every path
  if (failed.empty() && e != cudaSuccess) failed = std::string("capture: ") + cudaGetErrorString(e);
  if (failed.empty()) {
    e = cudaGraphInstantiate(&g.exec, g.graph, 0);
    if (e != cudaSuccess) failed = std::string("instantiate: ") + cudaGetErrorString(e);
  }
  if (!failed.empty()) (void)cudaGetLastError();  // capture errors are not sticky: clear them
  return failed;
}

}  // namespace

Timing time_graph_launches(const LaunchFn& launch, cudaStream_t stream, const TimingOptions& o) {
  // The batch: long enough to time (sized by an eager pilot, which overestimates a short
  // operation: a longer batch, no harm) and to cycle through the rotation.
  int64_t next = 0;
  const double eager = warm_up_and_pilot(launch, stream, o, next);
  const auto cap = static_cast<int64_t>(o.max_launches_per_sample);
  const int64_t L = std::clamp<int64_t>(
      std::max(static_cast<int64_t>(std::ceil(o.sample_s / eager)), o.rotation_launches), 1, cap);

  CapturedGraph g;
  const std::string why = capture(launch, stream, next, L, g);
  if (!why.empty()) {
    Timing t = time_launches(launch, stream, o);
    t.graph_fallback = why;
    return t;
  }
  // One replay uploads the graph, one more measures the batch as the device runs it.
  const auto replay = [&] { CUDA_CHECK(cudaGraphLaunch(g.exec, stream)); };
  replay();
  const double batch_s = sample_batches(replay, stream, 1, 1).median;
  const int64_t S = sample_count(o, batch_s);
  Timing t;
  t.per_launch_s = sample_batches(replay, stream, S, L, o.clocks, &t.clocks);
  t.launches_per_sample = L;
  t.launches = next + L * (S + 2);
  t.timer = "cuda_graph";
  return t;
}

Json method_json(const Timing& t, const TimingOptions& o) {
  Json j{{"samples", t.per_launch_s.count},
         {"launches_per_sample", t.launches_per_sample},
         {"warmup_launches", o.warmup_launches},
         {"timer", t.timer}};
  if (!t.graph_fallback.empty()) j["graph_fallback"] = t.graph_fallback;
  if (!t.clocks.empty()) j["clocks"] = to_json(t.clocks);
  return j;
}

}  // namespace hetplan::profiler
