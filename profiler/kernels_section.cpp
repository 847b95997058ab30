// The kernels section: the device-to-device copy probe (the memory-bandwidth ceiling) and every
// case of the kernels/ registry over its sizes, small to large (profiler/common/kernel_sweep.h).
#include <fmt/format.h>

#include "profiler/common/kernel_sweep.h"

#include "costmodel/errors.h"
#include "profiler/cuda_check.h"
#include "profiler/cupti_trace.h"
#include "profiler/device.h"
#include "profiler/device_fill.h"
#include "profiler/gemm/lt_gemm.h"
#include "profiler/section.h"
#include "profiler/timing.h"

#include "kernels/registry.h"

namespace hetplan::profiler {
namespace {

// Trace of `n` launches into a measurement's `trace` (when CUPTI is on).
Json trace_json(SectionContext& ctx, const LaunchFn& launch, int64_t n, double median_s) {
  if (!ctx.tracer.available()) return Json();
  const TraceResult t = ctx.tracer.trace(
      [&] {
        for (int64_t i = 0; i < n; ++i) launch(i);
      },
      ctx.device.stream(), n);
  return t.kernel_count > 0 ? t.to_json(median_s) : Json();
}

namespace K = ::hetplan::kernels;

Dtype to_dtype(K::DType d) {
  switch (d) {
    case K::DType::kF32:
      return Dtype::kFp32;
    case K::DType::kBF16:
      return Dtype::kBf16;
    case K::DType::kF16:
      return Dtype::kFp16;
  }
  return Dtype::kFp32;
}

std::vector<PlanItem> registry_items(bool quick) {
  std::vector<PlanItem> items;
  for (const K::Case& c : K::all_cases()) {
    // Quick: the training dtypes' kernels (bf16), the probes and the optimizer; not fp32 twins.
    if (quick && c.dtype == K::DType::kF32 && c.family != "bandwidth" && c.pass != "optimizer")
      continue;
    for (const auto& shape : kernel_sweep_shapes(c.dims, c.bench_shapes, quick)) {
      const std::string text = kernel_shape_text(c.dims, shape);
      const K::Work w = c.work(shape);
      // Check (CPU reference on samples) and allocation dominate small shapes; bytes at 2.5 TB/s
      // and FLOPs at 300 TFLOP/s over the timing target the large ones.
      const double run_s = std::max(w.bytes / 2.5e12, w.flops / 300e12) + 5e-6;
      items.push_back({"kernels", fmt::format("kernel/{}/{}", c.name, text),
                       fmt::format("{} {}", c.name, text),
                       0.15 + std::max(quick ? 5e-3 : 20e-3, 8 * run_s),
                       Json{{"case", c.name}, {"shape", shape}}});
    }
  }
  return items;
}

// Checks one case at one shape against its CPU reference, then times it rotating instances past
// three times the L2 (as kernels/bench does), then traces a batch.
Json measure_case(const K::Case& c, const K::Shape& shape, SectionContext& ctx, uint64_t seed) {
  if (const std::string why = c.unsupported(shape); !why.empty())
    throw GemmNotSupported("not supported: " + why);
  const cudaStream_t stream = ctx.device.stream();
  std::vector<std::unique_ptr<K::Instance>> instances;
  try {
    instances.push_back(c.make(shape, seed));
  } catch (const std::invalid_argument& e) {
    throw GemmNotSupported(std::string("not supported: ") + e.what());
  }
  const K::CheckResult check = instances[0]->check();
  if (!check.passed)
    throw RuntimeFailure(fmt::format("incorrect (against the CPU reference): {}; not timed",
                                     check.detail.substr(0, 300)));
  const size_t one = std::max<size_t>(instances[0]->device_bytes(), 1);
  const size_t rotate = 3 * static_cast<size_t>(ctx.device.info().l2_bytes);
  while (instances.size() < 16 && instances.size() * one < rotate) {
    const MemoryInfo m = device_memory();
    if (m.free_bytes < static_cast<int64_t>(one) + m.total_bytes / 4) break;
    instances.push_back(c.make(shape, seed + 1000 * instances.size()));
  }
  CUDA_CHECK(cudaDeviceSynchronize());  // instances fill on the default stream
  const LaunchFn launch = [&](int64_t i) {
    instances[static_cast<size_t>(i) % instances.size()]->run(stream);
  };
  TimingOptions topt;
  topt.target_s = ctx.options.quick ? 5e-3 : 20e-3;
  topt.clocks = &ctx.clocks;
  const Timing t = time_launches(launch, stream, topt);
  const K::Work w = c.work(shape);
  KernelMeasurement m;
  m.kernel = c.name;
  m.dtype = to_dtype(c.dtype);
  m.params = Json{{"family", c.family}, {"pass", c.pass}, {"note", c.note}};
  for (size_t i = 0; i < shape.size() && i < c.dims.size(); ++i) m.params[c.dims[i]] = shape[i];
  m.bytes = w.bytes;
  m.flops = w.flops;
  m.time_s = t.per_launch_s;
  m.method = method_json(t, topt);
  m.method["rotation"] = {{"instances", instances.size()}, {"instance_bytes", one}};
  m.method["check"] = {{"worst_rel_l2", check.worst_rel_l2},
                       {"reference", "kernels/reference CPU implementation"}};
  m.trace = trace_json(ctx, launch, std::min<int64_t>(t.launches_per_sample, 100), m.time_s.median);
  return to_json(m);
}

// Copy sizes: launch-bound (64 KiB) to far beyond L2 (1 GiB); bytes counted read + write.
std::vector<int64_t> copy_sizes(bool quick) {
  std::vector<int64_t> out;
  for (int64_t b = int64_t{64} << 10; b <= (int64_t{1} << 30); b *= quick ? 16 : 4)
    out.push_back(b);
  return out;
}

class KernelsSection : public Section {
 public:
  std::string name() const override { return "kernels"; }

  std::vector<PlanItem> plan(SectionContext& ctx) override {
    std::vector<PlanItem> items = registry_items(ctx.options.quick);
    for (int64_t b : copy_sizes(ctx.options.quick)) {
      items.push_back({name(), fmt::format("kernel/d2d_copy/{}", b),
                       fmt::format("d2d copy {}", bytes_text(double(b))),
                       0.01 + 2.0 * b / 3e12 * 60, Json{{"probe", "d2d_copy"}, {"bytes", b}}});
    }
    return items;
  }

  Json measure(const PlanItem& item, SectionContext& ctx) override {
    if (item.spec.contains("case")) {
      const K::Case* c = K::find_case(item.spec["case"].get<std::string>());
      if (c == nullptr) throw RuntimeFailure("kernels/ registry has no case " + item.label);
      return measure_case(*c, item.spec["shape"].get<K::Shape>(), ctx, seed_ += 7919);
    }
    return measure_copy(item.spec.at("bytes").get<int64_t>(), ctx);
  }

  void end(SectionContext&) override {
    src_ = DeviceBuffer();
    dst_ = DeviceBuffer();
  }

 private:
  // cudaMemcpyAsync device to device: what a memory-bound kernel can hope for.
  Json measure_copy(int64_t bytes, SectionContext& ctx) {
    const cudaStream_t stream = ctx.device.stream();
    const int64_t l2 = ctx.device.info().l2_bytes;
    // Rotate over more than twice the L2 for small copies; one set past that.
    const int64_t sets = bytes >= 2 * l2 ? 1 : (2 * l2 + bytes - 1) / bytes + 1;
    const size_t need = static_cast<size_t>(sets * bytes);
    if (src_.bytes() < need) {
      src_ = DeviceBuffer();
      dst_ = DeviceBuffer();
      src_ = DeviceBuffer(need, "copy probe source");
      dst_ = DeviceBuffer(need, "copy probe destination");
      fill_uniform(src_.get(), static_cast<int64_t>(need / 4), Dtype::kFp32, 7, 1.0f, stream);
    }
    auto* s = static_cast<char*>(src_.get());
    auto* d = static_cast<char*>(dst_.get());
    // Verify: one copy, compare a few words.
    CUDA_CHECK(cudaMemsetAsync(d, 0xFF, static_cast<size_t>(bytes), stream));
    CUDA_CHECK(cudaMemcpyAsync(d, s, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, stream));
    std::vector<uint32_t> a(16), b(16);
    const int64_t last = bytes - static_cast<int64_t>(a.size() * 4);
    for (int64_t off : {int64_t{0}, last}) {
      CUDA_CHECK(cudaMemcpyAsync(a.data(), s + off, a.size() * 4, cudaMemcpyDeviceToHost, stream));
      CUDA_CHECK(cudaMemcpyAsync(b.data(), d + off, b.size() * 4, cudaMemcpyDeviceToHost, stream));
      CUDA_CHECK(cudaStreamSynchronize(stream));
      if (a != b) throw RuntimeFailure("device copy check failed: destination differs");
    }
    const LaunchFn launch = [&](int64_t i) {
      const size_t off = static_cast<size_t>((i % sets) * bytes);
      CUDA_CHECK(cudaMemcpyAsync(d + off, s + off, static_cast<size_t>(bytes),
                                 cudaMemcpyDeviceToDevice, stream));
    };
    TimingOptions topt;
    topt.target_s = ctx.options.quick ? 5e-3 : 20e-3;
    topt.clocks = &ctx.clocks;
    const Timing t = time_launches(launch, stream, topt);
    KernelMeasurement m;
    m.kernel = "d2d_copy";
    m.dtype = Dtype::kFp32;
    m.params = Json{{"copy_bytes", bytes}, {"api", "cudaMemcpyAsync device to device"}};
    m.bytes = 2.0 * static_cast<double>(bytes);  // read + write
    m.time_s = t.per_launch_s;
    m.method = method_json(t, topt);
    m.method["rotation"] = {{"sets", sets}};
    m.trace =
        trace_json(ctx, launch, std::min<int64_t>(t.launches_per_sample, 100), m.time_s.median);
    return to_json(m);
  }

  DeviceBuffer src_, dst_;
  uint64_t seed_ = 1;
};

}  // namespace

std::unique_ptr<Section> make_kernels_section() { return std::make_unique<KernelsSection>(); }

}  // namespace hetplan::profiler
