#include "kernels/bench/bench_timing.h"

#include <algorithm>
#include <chrono>

#include "kernels/cuda_check.h"
#include "profiler/common/clock_monitor.h"

namespace hetplan::kernels::bench {

Event::Event() { HETPLAN_CUDA_CHECK(cudaEventCreate(&e_)); }
Event::~Event() {
  if (e_) cudaEventDestroy(e_);
}
Stream::Stream() { HETPLAN_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
Stream::~Stream() {
  if (s_) cudaStreamDestroy(s_);
}

Timing time_runs(std::vector<std::unique_ptr<Instance>>& instances, cudaStream_t stream,
                 const TimingOptions& options) {
  const int n = static_cast<int>(instances.size());
  Event start, stop;
  // Warm-up: every instance at least once, then until warmup_seconds have passed.
  const auto t0 = std::chrono::steady_clock::now();
  do {
    for (auto& inst : instances) inst->run(stream);
    HETPLAN_CUDA_CHECK(cudaStreamSynchronize(stream));
  } while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() <
           options.warmup_seconds);

  // One sample = every instance once, in turn, between two events; at least 4 runs a sample so
  // that the launch of one overlaps the execution of the previous.
  const int runs = std::max(n, 4);
  std::vector<double> samples;
  std::vector<ClockSample> readings;
  double total = 0;
  while (static_cast<int>(samples.size()) < options.max_samples &&
         (total < options.max_seconds || samples.size() < 5)) {
    HETPLAN_CUDA_CHECK(cudaEventRecord(start.get(), stream));
    for (int i = 0; i < runs; ++i) instances[static_cast<size_t>(i % n)]->run(stream);
    HETPLAN_CUDA_CHECK(cudaEventRecord(stop.get(), stream));
    if (options.clocks) {
      const cudaEvent_t end = stop.get();
      options.clocks->read_while([end] { return cudaEventQuery(end) == cudaErrorNotReady; },
                                 readings);
    }
    HETPLAN_CUDA_CHECK(cudaEventSynchronize(stop.get()));
    float ms = 0;
    HETPLAN_CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
    samples.push_back(ms * 1e-3 / runs);
    total += ms * 1e-3;
  }
  std::sort(samples.begin(), samples.end());
  Timing t;
  t.samples = static_cast<int>(samples.size());
  t.median_s = samples.size() % 2
                   ? samples[samples.size() / 2]
                   : 0.5 * (samples[samples.size() / 2 - 1] + samples[samples.size() / 2]);
  t.min_s = samples.front();
  t.max_s = samples.back();
  t.runs_per_sample = runs;
  t.instances = n;
  t.clocks = summarize_clocks(readings);
  return t;
}

}  // namespace hetplan::kernels::bench
