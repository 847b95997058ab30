#include "profiler/cupti_trace.h"

#include <cxxabi.h>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <mutex>

#include <cupti.h>
#include <fmt/format.h>

#include "costmodel/errors.h"
#include "profiler/cuda_check.h"
#include "profiler/device.h"
#include "profiler/stream_gate.h"

namespace hetplan::profiler {
namespace {

struct KernelRecord {
  std::string name;
  uint64_t start_ns = 0, end_ns = 0;
};

// CUPTI delivers records through C callbacks; this is where they land. One tracer per process.
struct Sink {
  std::mutex mutex;
  std::vector<KernelRecord> records;
  int64_t dropped = 0;
};
Sink& sink() {
  static Sink s;
  return s;
}

constexpr size_t kBufferBytes = size_t{8} << 20;
constexpr size_t kBufferAlign = 8;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kBufferAlign, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

std::string demangle(const char* name) {
  if (name == nullptr) return "?";
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string out = (status == 0 && d) ? d : name;
  std::free(d);
  constexpr size_t kMaxName = 200;
  if (out.size() > kMaxName) out.resize(kMaxName);
  return out;
}

void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t* buffer, size_t,
                               size_t valid) {
  Sink& s = sink();
  std::lock_guard<std::mutex> lock(s.mutex);
  CUpti_Activity* rec = nullptr;
  while (valid > 0 && cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
        rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
      s.records.push_back({demangle(k->name), k->start, k->end});
    }
  }
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(ctx, stream_id, &dropped) == CUPTI_SUCCESS)
    s.dropped += static_cast<int64_t>(dropped);
  std::free(buffer);
}

// Kernel tracing switched on for a scope, and off again on every way out of it.
class KernelActivityScope {
 public:
  KernelActivityScope() : result_(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)) {}
  ~KernelActivityScope() {
    if (result_ == CUPTI_SUCCESS) cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  }
  KernelActivityScope(const KernelActivityScope&) = delete;
  KernelActivityScope& operator=(const KernelActivityScope&) = delete;
  CUptiResult result() const { return result_; }

 private:
  CUptiResult result_;
};

}  // namespace

std::vector<std::string> TraceResult::names() const {
  std::vector<std::string> out;
  for (const auto& k : kernels) out.push_back(k.name);
  return out;
}

double TraceResult::event_vs_cupti() const { return span_s > 0 ? event_s / span_s - 1 : 0; }

Json TraceResult::to_json(double timed_median_s) const {
  const double n = static_cast<double>(std::max<int64_t>(1, launches));
  Json kernels_json = Json::array();
  for (const auto& k : kernels)
    kernels_json.push_back(
        {{"name", k.name},
         {"count", k.count},
         {"mean_s", k.total_s / static_cast<double>(std::max<int64_t>(1, k.count))}});
  const bool clocks_disagree = gated && std::abs(event_vs_cupti()) > kTraceDisagreement;
  Json j{{"launches", launches},
         {"gated", gated},
         {"kernels_per_launch", static_cast<double>(kernel_count) / n},
         {"kernel_s_per_launch", kernel_s / n},
         {"span_s_per_launch", span_s / n},
         {"event_s_per_launch", event_s / n},
         // Device idle between the region's kernels, per operation, when enqueued ahead.
         {"gap_s_per_launch", std::max(0.0, span_s - kernel_s) / n},
         {"event_vs_cupti", event_vs_cupti()},
         {"disagreement", clocks_disagree},
         {"kernels", kernels_json}};
  if (timed_median_s > 0 && span_s > 0) {
    // The untimed median per operation lies between the kernels' own time (graph replays run
    // them with almost no gap: 0.96-1.03x on the H100's GEMMs, 2026-11-23) and the traced span
    // of eager launches (each leaves the device idle about a microsecond). Above the span it
    // timed the host's launch rate; below the kernels one of the timers is wrong.
    const double kernel_per_op = kernel_s / n, span_per_op = span_s / n;
    j["overhead_s_per_launch"] = std::max(0.0, timed_median_s - kernel_per_op);
    j["traced_vs_timed"] = span_per_op / timed_median_s - 1;
    j["kernel_vs_timed"] = kernel_per_op / timed_median_s - 1;
    j["launch_bound"] = timed_median_s > (1 + kTraceDisagreement) * span_per_op;
    j["disagreement"] =
        clocks_disagree || kernel_per_op > (1 + kTraceDisagreement) * timed_median_s;
  }
  if (dropped_records > 0) j["dropped_records"] = dropped_records;
  return j;
}

CuptiTracer::CuptiTracer(bool enabled) {
  if (!enabled) {
    reason_ = "CUPTI tracing disabled by --no-cupti";
    return;
  }
  const CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
  if (r != CUPTI_SUCCESS) {
    reason_ = "CUPTI unavailable: " + cupti_error_text(r);
    return;
  }
  available_ = true;
}

CuptiTracer::~CuptiTracer() {
  if (available_) cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

std::string CuptiTracer::version() const {
  uint32_t v = 0;
  if (cuptiGetVersion(&v) != CUPTI_SUCCESS) return "";
  return fmt::format("api {}", v);
}

TraceResult CuptiTracer::trace(const std::function<void()>& region, cudaStream_t stream,
                               int64_t launches) {
  TraceResult result;
  result.launches = launches;
  if (!available_) return result;
  {
    std::lock_guard<std::mutex> lock(sink().mutex);
    sink().records.clear();
    sink().dropped = 0;
  }
  CUDA_CHECK(cudaStreamSynchronize(stream));
  CudaEvent start, stop;
  {
    KernelActivityScope scope;
    if (scope.result() != CUPTI_SUCCESS) {
      available_ = false;
      reason_ = "CUPTI kernel tracing could not be enabled: " + cupti_error_text(scope.result());
      return result;
    }
    StreamGate gate(stream);
    start.record(stream);
    region();
    stop.record(stream);
    gate.open();
    CUDA_CHECK(cudaEventSynchronize(stop.get()));
    result.gated = !gate.expired();
  }
  result.event_s = stop.seconds_since(start);
  const CUptiResult r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (r != CUPTI_SUCCESS) {
    available_ = false;
    reason_ = "CUPTI flush failed: " + cupti_error_text(r);
    return result;
  }
  std::vector<KernelRecord> records;
  {
    std::lock_guard<std::mutex> lock(sink().mutex);
    records.swap(sink().records);
    result.dropped_records = sink().dropped;
  }
  // The gate's own kernel is no part of the region.
  std::erase_if(records, [](const KernelRecord& k) {
    return k.name.find(kStreamGateKernel) != std::string::npos;
  });
  if (records.empty()) return result;
  uint64_t first = records.front().start_ns, last = records.front().end_ns;
  for (const auto& k : records) {
    first = std::min(first, k.start_ns);
    last = std::max(last, k.end_ns);
    const double d = static_cast<double>(k.end_ns - k.start_ns) * 1e-9;
    result.kernel_s += d;
    auto it = std::find_if(result.kernels.begin(), result.kernels.end(),
                           [&](const KernelSummary& s) { return s.name == k.name; });
    if (it == result.kernels.end()) {
      result.kernels.push_back({k.name, 0, 0});
      it = result.kernels.end() - 1;
    }
    ++it->count;
    it->total_s += d;
  }
  result.kernel_count = static_cast<int64_t>(records.size());
  result.span_s = static_cast<double>(last - first) * 1e-9;
  return result;
}

}  // namespace hetplan::profiler
