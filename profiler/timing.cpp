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
  int64_t next = 0;
  for (int i = 0; i < o.warmup_launches; ++i) launch(next++);
  CUDA_CHECK(cudaStreamSynchronize(stream));

  // The batch: long enough to time (sized by an eager pilot, which overestimates a short
  // operation: a longer batch, no harm) and to cycle through the rotation.
  double eager = time_batch(launch, stream, next, 1);
  next += 1;
  if (eager < 50e-6) {
    eager = time_batch(launch, stream, next, 20);
    next += 20;
  }
  eager = std::max(eager, 1e-7);
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
  // One replay uploads the graph and measures the batch as the device runs it.
  CUDA_CHECK(cudaGraphLaunch(g.exec, stream));
  CudaEvent start, stop;
  start.record(stream);
  CUDA_CHECK(cudaGraphLaunch(g.exec, stream));
  stop.record(stream);
  CUDA_CHECK(cudaEventSynchronize(stop.get()));
  const double batch_s = std::max(stop.seconds_since(start), 1e-7);
  const auto S = static_cast<int64_t>(
      std::clamp(std::ceil(o.target_s / batch_s), double(o.min_samples), double(o.max_samples)));

  std::vector<CudaEvent> events(static_cast<size_t>(S + 1));
  events[0].record(stream);
  for (int64_t s = 0; s < S; ++s) {
    CUDA_CHECK(cudaGraphLaunch(g.exec, stream));
    events[static_cast<size_t>(s + 1)].record(stream);
  }
  CUDA_CHECK(cudaEventSynchronize(events.back().get()));
  std::vector<double> samples;
  samples.reserve(static_cast<size_t>(S));
  for (int64_t s = 0; s < S; ++s)
    samples.push_back(
        events[static_cast<size_t>(s + 1)].seconds_since(events[static_cast<size_t>(s)]) /
        static_cast<double>(L));
  Timing t;
  t.per_launch_s = summarize(std::move(samples));
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
  return j;
}

}  // namespace hetplan::profiler
