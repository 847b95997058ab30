// The kernels section: the device-to-device copy probe (the memory-bandwidth ceiling) and, once
// kernels/registry.h lands, every registered kernel over its sizes.
#include <fmt/format.h>

#include "costmodel/errors.h"
#include "profiler/cuda_check.h"
#include "profiler/cupti_trace.h"
#include "profiler/device.h"
#include "profiler/device_fill.h"
#include "profiler/section.h"
#include "profiler/timing.h"

namespace hetplan::profiler {
namespace {

// Copy sizes: launch-bound (64 KiB) to far beyond L2 (1 GiB); bytes counted read + write.
std::vector<int64_t> copy_sizes(bool quick) {
  std::vector<int64_t> out;
  for (int64_t b = int64_t{64} << 10; b <= (int64_t{1} << 30); b *= quick ? 16 : 4) out.push_back(b);
  return out;
}

class KernelsSection : public Section {
 public:
  std::string name() const override { return "kernels"; }

  std::vector<PlanItem> plan(SectionContext& ctx) override {
    std::vector<PlanItem> items;
    for (int64_t b : copy_sizes(ctx.options.quick)) {
      items.push_back({name(), fmt::format("kernel/d2d_copy/{}", b),
                       fmt::format("d2d copy {}", bytes_text(double(b))),
                       0.01 + 2.0 * b / 3e12 * 60, Json{{"probe", "d2d_copy"}, {"bytes", b}}});
    }
    return items;
  }

  Json measure(const PlanItem& item, SectionContext& ctx) override {
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
    const Timing t = time_launches(launch, stream, topt);
    KernelMeasurement m;
    m.kernel = "d2d_copy";
    m.dtype = Dtype::kFp32;
    m.params = Json{{"copy_bytes", bytes}, {"api", "cudaMemcpyAsync device to device"}};
    m.bytes = 2.0 * static_cast<double>(bytes);  // read + write
    m.time_s = t.per_launch_s;
    m.method = method_json(t, topt);
    m.method["rotation"] = {{"sets", sets}};
    if (ctx.tracer.available()) {
      const int64_t n = std::min<int64_t>(t.launches_per_sample, 100);
      const TraceResult trace = ctx.tracer.trace(
          [&] {
            for (int64_t i = 0; i < n; ++i) launch(i);
          },
          stream, n);
      if (trace.kernel_count > 0) m.trace = trace.to_json(m.time_s.median);
    }
    return to_json(m);
  }

  DeviceBuffer src_, dst_;
};

}  // namespace

std::unique_ptr<Section> make_kernels_section() { return std::make_unique<KernelsSection>(); }

}  // namespace hetplan::profiler
