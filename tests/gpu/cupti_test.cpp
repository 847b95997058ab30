// CUPTI tracing of a measured GEMM: kernels are recorded, named, and agree with the CUDA events.
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "profiler/common/kernel_names.h"
#include "profiler/cuda_check.h"
#include "profiler/cupti_trace.h"
#include "profiler/device.h"
#include "profiler/device_fill.h"
#include "profiler/gemm/lt_gemm.h"
#include "profiler/stream_gate.h"
#include "profiler/timing.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/square_gemm.h"

namespace hetplan::profiler {
namespace {

TEST(CuptiOnGpu, RecordsTheKernelsOfAGemm) {
  HETPLAN_REQUIRE_GPU();
  const DeviceInfo info = query_device(0);
  CUDA_CHECK(cudaSetDevice(0));
  CuptiTracer tracer(true);
  if (!tracer.available()) GTEST_SKIP() << tracer.unavailable_reason();
  CudaStream stream;
  SquareGemm gemm(info, 4096, stream.get());
  const LaunchFn launch = [&](int64_t) { gemm.run(stream.get()); };
  const Timing timing = time_launches(launch, stream.get(), TimingOptions{});
  const TraceResult trace = tracer.trace(
      [&] {
        for (int i = 0; i < 10; ++i) launch(i);
      },
      stream.get(), 10);
  ASSERT_GE(trace.kernel_count, 10);  // at least one kernel per product
  EXPECT_TRUE(trace.gated);           // ten launches fit behind the gate
  ASSERT_FALSE(trace.kernels.empty());
  EXPECT_FALSE(trace.kernels[0].name.empty());
  EXPECT_GT(trace.kernel_s, 0);
  EXPECT_GT(trace.span_s, 0);
  // A 4096^3 product runs for hundreds of microseconds: the event and CUPTI clocks agree, and
  // the traced time per product is close to the untraced median.
  EXPECT_LT(std::abs(trace.event_vs_cupti()), kTraceDisagreement) << trace.event_vs_cupti();
  EXPECT_NEAR(trace.event_s / 10, timing.per_launch_s.median, 0.1 * timing.per_launch_s.median);
  const Json j = trace.to_json(timing.per_launch_s.median);
  EXPECT_FALSE(j["disagreement"].get<bool>());
  EXPECT_FALSE(j["launch_bound"].get<bool>());  // hundreds of microseconds per product
  // The gate's own kernel is left out of the region's kernels.
  for (const auto& name : trace.names())
    EXPECT_EQ(name.find(kStreamGateKernel), std::string::npos) << name;
  if (info.has_bf16()) {
    EXPECT_TRUE(any_tensor_core(trace.names())) << trace.names()[0];
  }
  std::cout << "bf16 4096^3 kernels: " << trace.names()[0] << "\n";
}

// A replayed graph times the device: for a large product it agrees with eager launches, and for a
// tiny one (host-bound when launched eagerly) it is no slower and not far from the kernel itself.
TEST(TimingOnGpu, GraphReplayMatchesEagerForLargeAndIsNoSlowerForTiny) {
  HETPLAN_REQUIRE_GPU();
  CUDA_CHECK(cudaSetDevice(0));
  const DeviceInfo info = query_device(0);
  const Dtype dtype = info.has_bf16() ? Dtype::kBf16 : Dtype::kFp16;
  LtHandle handle;
  DeviceBuffer ws(kGemmWorkspaceBytes, "workspace");
  CudaStream stream;
  for (const int64_t n : {4096, 64}) {
    const GemmShape s{n, n, n, 1, true, false};
    LtGemm gemm(handle.get(), dtype, s, nullptr);
    DeviceBuffer a(s.m * s.k * 2, "A"), b(s.k * s.n * 2, "B"), c(s.m * s.n * 2, "C");
    fill_uniform(a.get(), s.m * s.k, dtype, 1, 1.0f, stream.get());
    fill_uniform(b.get(), s.k * s.n, dtype, 2, 1.0f, stream.get());
    const LaunchFn launch = [&](int64_t) {
      gemm.run(a.get(), b.get(), c.get(), ws.get(), stream.get());
    };
    TimingOptions o;
    o.rotation_launches = 3;
    const Timing eager = time_launches(launch, stream.get(), o);
    const Timing graph = time_graph_launches(launch, stream.get(), o);
    EXPECT_EQ(graph.timer, "cuda_graph") << graph.graph_fallback;
    EXPECT_GE(graph.launches_per_sample, 3);
    const double e = eager.per_launch_s.median, g = graph.per_launch_s.median;
    std::cout << "bf16 " << n << "^3: eager " << e * 1e6 << " us, graph " << g * 1e6 << " us\n";
    if (n == 4096)
      EXPECT_NEAR(g, e, 0.05 * e);
    else
      EXPECT_LT(g, 1.05 * e);
  }
}

// The gate holds the stream until opened, and lets it go by itself after its timeout.
TEST(StreamGateOnGpu, HoldsTheStreamUntilOpenedOrItsTimeout) {
  HETPLAN_REQUIRE_GPU();
  CUDA_CHECK(cudaSetDevice(0));
  CudaStream stream;
  CudaEvent after;
  {
    StreamGate gate(stream.get(), 10.0);
    after.record(stream.get());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(cudaEventQuery(after.get()), cudaErrorNotReady);  // still held
    gate.open();
    CUDA_CHECK(cudaEventSynchronize(after.get()));
    EXPECT_FALSE(gate.expired());
  }
  {
    StreamGate gate(stream.get(), 0.001);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    after.record(stream.get());
    CUDA_CHECK(cudaEventSynchronize(after.get()));  // passed without open()
    EXPECT_TRUE(gate.expired());
  }
}

}  // namespace
}  // namespace hetplan::profiler
