#include "profiler/gemm/gemm_bench.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "costmodel/errors.h"
#include "profiler/common/kernel_names.h"
#include "profiler/cuda_check.h"
#include "profiler/cupti_trace.h"
#include "profiler/device_fill.h"
#include "profiler/gemm/reference.h"
#include "profiler/timing.h"

namespace hetplan::profiler {
namespace {

constexpr size_t kAlign = 256;  // cuBLASLt's default alignment assumption
size_t align_up(size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

// fp32 and tf32 share storage; pools are per storage type.
Dtype storage_of(Dtype d) { return d == Dtype::kTf32 ? Dtype::kFp32 : d; }

size_t a_bytes(Dtype d, const GemmShape& s) {
  return align_up(static_cast<size_t>(s.m * s.k * s.batch) * gemm_input_bytes(d));
}
size_t b_bytes(Dtype d, const GemmShape& s) {
  return align_up(static_cast<size_t>(s.k * s.n * s.batch) * gemm_input_bytes(d));
}

constexpr int kMaxTracedLaunches = 100;

}  // namespace

size_t gemm_set_bytes(Dtype dtype, const GemmShape& shape) {
  return a_bytes(dtype, shape) + b_bytes(dtype, shape);
}

int64_t rotation_sets(size_t set_bytes, int64_t l2_bytes) {
  const double need = 2.0 * static_cast<double>(l2_bytes);
  if (static_cast<double>(set_bytes) >= need) return 1;  // one set already flushes the L2
  return static_cast<int64_t>(std::ceil(need / double(set_bytes))) + 1;
}

GemmBench::GemmBench(const DeviceInfo& device)
    : l2_bytes_(device.l2_bytes),
      workspace_(kGemmWorkspaceBytes, "cuBLASLt workspace"),
      scale_one_(sizeof(float), "fp8 scale") {
  const float one = 1.0f;
  CUDA_CHECK(cudaMemcpy(scale_one_.get(), &one, sizeof(one), cudaMemcpyHostToDevice));
}

void GemmBench::plan_pools(const std::vector<GemmCase>& todo) {
  for (const auto& c : todo) {
    const size_t set = gemm_set_bytes(c.dtype, c.shape);
    const size_t need = set * static_cast<size_t>(rotation_sets(set, l2_bytes_));
    size_t& planned = planned_pool_bytes_[storage_of(c.dtype)];
    planned = std::max(planned, need);
  }
}

const DeviceBuffer& GemmBench::pool(Dtype storage, size_t bytes, cudaStream_t stream) {
  if (pool_ && pool_dtype_ == storage && pool_.bytes() >= bytes) return pool_;
  pool_ = DeviceBuffer();  // free the previous pool before taking the next
  // Size for the largest planned GEMM of this type, as far as free memory allows, so that the
  // pool is filled once per type rather than once per shape.
  const MemoryInfo mem = device_memory();
  const size_t cap = static_cast<size_t>(0.6 * static_cast<double>(mem.free_bytes));
  const size_t target = std::max(bytes, std::min(planned_pool_bytes_[storage], cap));
  pool_ = DeviceBuffer(target, fmt::format("{} GEMM inputs", to_string(storage)));
  pool_dtype_ = storage;
  fill_uniform(pool_.get(), static_cast<int64_t>(target / gemm_input_bytes(storage)), storage,
               seed_++, 1.0f, stream);
  return pool_;
}

GemmMeasurement GemmBench::measure(const GemmCase& c, SectionContext& ctx) {
  const cudaStream_t stream = ctx.device.stream();
  const GemmShape& s = c.shape;
  LtGemm gemm(handle_.get(), c.dtype, s, scale_one_.as<float>());

  const size_t set = gemm_set_bytes(c.dtype, s);
  int64_t sets = rotation_sets(set, l2_bytes_);
  const DeviceBuffer& inputs = pool(storage_of(c.dtype), set, stream);
  sets = std::min<int64_t>(sets, static_cast<int64_t>(inputs.bytes() / set));
  const size_t out_bytes =
      align_up(static_cast<size_t>(s.m * s.n * s.batch) * gemm_output_bytes(c.dtype));
  if (output_.bytes() < out_bytes) {
    output_ = DeviceBuffer();
    output_ = DeviceBuffer(out_bytes, "GEMM output");
  }
  auto* base = static_cast<char*>(inputs.get());
  const size_t a_size = a_bytes(c.dtype, s);
  auto a_of = [&](int64_t i) { return base + static_cast<size_t>(i % sets) * set; };
  auto b_of = [&](int64_t i) { return a_of(i) + a_size; };

  // Verify first: poisoned output (NaN in every float format), one product, reference check.
  CUDA_CHECK(cudaMemsetAsync(output_.get(), 0xFF, out_bytes, stream));
  gemm.run(a_of(0), b_of(0), output_.get(), workspace_.get(), stream);
  const GemmCheck check =
      check_gemm(c.dtype, GemmDims{s.m, s.n, s.k, s.batch, s.trans_a, s.trans_b}, a_of(0), b_of(0),
                 output_.get(), stream);
  if (!check.passed)
    throw RuntimeFailure(
        fmt::format("incorrect: relative error {:.3g} over {} sampled outputs "
                    "exceeds {:.1g}; not timed",
                    check.relative_error, check.samples, check.threshold));

  TimingOptions topt;
  topt.target_s = gemm_timing_target_s(ctx.options.quick);
  topt.rotation_launches = sets;
  topt.clocks = &ctx.clocks;
  const LaunchFn launch = [&](int64_t i) {
    gemm.run(a_of(i), b_of(i), output_.get(), workspace_.get(), stream);
  };
  // Replayed graphs: the device time, not the host's launch rate (profiler/timing.h).
  const Timing timing = time_graph_launches(launch, stream, topt);

  GemmMeasurement m;
  m.dtype = c.dtype;
  m.shape = s;
  m.origin = c.origin;
  m.time_s = timing.per_launch_s;
  m.algo = gemm.algo_json();
  m.method = method_json(timing, topt);
  m.method["rotation"] = {{"sets", sets}, {"set_bytes", set}, {"l2_bytes", l2_bytes_}};
  m.method["check"] = {{"samples", check.samples},
                       {"relative_error", check.relative_error},
                       {"threshold", check.threshold},
                       {"reference", "fp64 dot products on the GPU from the same inputs"}};
  if (ctx.tracer.available()) {
    const int64_t n = std::min<int64_t>(timing.launches_per_sample, kMaxTracedLaunches);
    const TraceResult trace = ctx.tracer.trace(
        [&] {
          for (int64_t i = 0; i < n; ++i) launch(i);
        },
        stream, n);
    if (trace.kernel_count > 0) {
      m.kernels = trace.names();
      m.tensor_cores = any_tensor_core(m.kernels);
      m.trace = trace.to_json(m.time_s.median);
    }
  }
  return m;
}

}  // namespace hetplan::profiler
