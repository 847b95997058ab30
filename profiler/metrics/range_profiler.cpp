#include "profiler/metrics/range_profiler.h"

#include <cuda_runtime_api.h>
#include <cupti.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>
#include <cxxabi.h>

#include <cstdlib>
#include <map>
#include <memory>

namespace hetplan::profiler::metrics {
namespace {

// A CUPTI parameter struct: zeroed (pPriv and every optional field null), its size set.
template <class P>
P params(size_t struct_size) {
  P p{};
  p.structSize = struct_size;
  return p;
}

// At most this many kernel launches per profiled region (attention's backward runs three or four).
constexpr size_t kMaxRanges = 64;

CounterState state_of(CUptiResult r) {
  switch (r) {
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES:
      return CounterState::kRestricted;
    case CUPTI_ERROR_NOT_SUPPORTED:
    case CUPTI_ERROR_NOT_COMPATIBLE:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED:
    case CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_INVALID_CHIP_NAME:
      return CounterState::kUnsupported;
    default:
      return CounterState::kFailed;
  }
}

std::string result_text(CUptiResult r) {
  const char* s = nullptr;
  std::string out = "CUPTI result " + std::to_string(static_cast<int>(r));
  if (cuptiGetResultString(r, &s) == CUPTI_SUCCESS && s != nullptr) out = s;
  if (r == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES) out += " (CUPTI_ERROR_INSUFFICIENT_PRIVILEGES)";
  return out;
}

void check(CUptiResult r, const char* call) {
  if (r == CUPTI_SUCCESS) return;
  throw CuptiFailure({state_of(r), call, result_text(r)});
}

std::string demangle(const char* name) {
  if (name == nullptr) return "?";
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> d(abi::__cxa_demangle(name, nullptr, nullptr, &status),
                                           std::free);
  return status == 0 && d ? std::string(d.get()) : std::string(name);
}

// A host object (the metric evaluator of one chip), deinitialised on scope exit.
class HostObject {
 public:
  HostObject(const std::string& chip, const std::vector<uint8_t>& availability) {
    auto p = params<CUpti_Profiler_Host_Initialize_Params>(
        CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE);
    p.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    p.pChipName = chip.c_str();
    p.pCounterAvailabilityImage = availability.empty() ? nullptr : availability.data();
    check(cuptiProfilerHostInitialize(&p), "cuptiProfilerHostInitialize");
    object_ = p.pHostObject;
  }
  ~HostObject() {
    auto p = params<CUpti_Profiler_Host_Deinitialize_Params>(
        CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE);
    p.pHostObject = object_;
    cuptiProfilerHostDeinitialize(&p);
  }
  HostObject(const HostObject&) = delete;
  HostObject& operator=(const HostObject&) = delete;
  CUpti_Profiler_Host_Object* get() const { return object_; }

  CUptiResult add(const std::vector<const char*>& names) {
    auto p = params<CUpti_Profiler_Host_ConfigAddMetrics_Params>(
        CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE);
    p.pHostObject = object_;
    p.ppMetricNames = const_cast<const char**>(names.data());
    p.numMetrics = names.size();
    return cuptiProfilerHostConfigAddMetrics(&p);
  }

 private:
  CUpti_Profiler_Host_Object* object_ = nullptr;
};

std::vector<const char*> c_strings(const std::vector<std::string>& v) {
  std::vector<const char*> out;
  for (const std::string& s : v) out.push_back(s.c_str());
  return out;
}

// The range profiler enabled on a context, disabled on scope exit.
class EnabledProfiler {
 public:
  explicit EnabledProfiler(CUcontext ctx) {
    auto p =
        params<CUpti_RangeProfiler_Enable_Params>(CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE);
    p.ctx = ctx;
    check(cuptiRangeProfilerEnable(&p), "cuptiRangeProfilerEnable");
    object_ = p.pRangeProfilerObject;
  }
  ~EnabledProfiler() {
    auto p =
        params<CUpti_RangeProfiler_Disable_Params>(CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE);
    p.pRangeProfilerObject = object_;
    cuptiRangeProfilerDisable(&p);
  }
  EnabledProfiler(const EnabledProfiler&) = delete;
  EnabledProfiler& operator=(const EnabledProfiler&) = delete;
  CUpti_RangeProfiler_Object* get() const { return object_; }

 private:
  CUpti_RangeProfiler_Object* object_ = nullptr;
};

// A driver API function through the runtime, so that the executable does not link libcuda (it
// then starts, and says there is no GPU, on a machine without the driver).
template <class Fn>
Fn driver_function(const char* symbol) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(symbol, &fn, 12000, cudaEnableDefault, &found) !=
          cudaSuccess ||
      found != cudaDriverEntryPointSuccess)
    return nullptr;
  return reinterpret_cast<Fn>(fn);
}

}  // namespace

CUcontext current_context() {
  auto get = driver_function<CUresult (*)(CUcontext*)>("cuCtxGetCurrent");
  CUcontext ctx = nullptr;
  if (get == nullptr || get(&ctx) != CUDA_SUCCESS) return nullptr;
  return ctx;
}

CuptiFailure::CuptiFailure(CounterStatus s)
    : std::runtime_error(s.call + ": " + s.detail), status(std::move(s)) {}

std::string cupti_version_text() {
  uint32_t v = 0;
  if (cuptiGetVersion(&v) != CUPTI_SUCCESS) return "";
  // CUPTI_API_VERSION is major * 10000 + minor * 100 + patch since CUDA 12 (130001: 13.0.1).
  if (v >= 10000)
    return std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." +
           std::to_string(v % 100) + " (API " + std::to_string(v) + ")";
  return "API " + std::to_string(v);
}

RangeProfiler::RangeProfiler(int device, CUcontext ctx) : device_(device), ctx_(ctx) {
  auto init =
      params<CUpti_Profiler_Initialize_Params>(CUpti_Profiler_Initialize_Params_STRUCT_SIZE);
  check(cuptiProfilerInitialize(&init), "cuptiProfilerInitialize");
  initialized_ = true;

  CUdevice dev = 0;
  auto device_get = driver_function<CUresult (*)(CUdevice*, int)>("cuDeviceGet");
  if (device_get != nullptr && device_get(&dev, device_) == CUDA_SUCCESS) {
    auto s = params<CUpti_Profiler_DeviceSupported_Params>(
        CUpti_Profiler_DeviceSupported_Params_STRUCT_SIZE);
    s.cuDevice = dev;
    s.api = CUPTI_PROFILER_RANGE_PROFILING;
    if (cuptiProfilerDeviceSupported(&s) == CUPTI_SUCCESS &&
        s.isSupported != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) {
      std::string why;
      auto note = [&](CUpti_Profiler_Support_Level l, const char* what) {
        if (l != CUPTI_PROFILER_CONFIGURATION_SUPPORTED &&
            l != CUPTI_PROFILER_CONFIGURATION_UNKNOWN)
          why += std::string(why.empty() ? "" : ", ") + what +
                 (l == CUPTI_PROFILER_CONFIGURATION_DISABLED ? " (disabled)" : " (unsupported)");
      };
      note(s.architecture, "architecture");
      note(s.sli, "SLI");
      note(s.vGpu, "vGPU");
      note(s.confidentialCompute, "confidential computing");
      note(s.cmp, "CMP");
      note(s.wsl, "WSL");
      throw CuptiFailure({CounterState::kUnsupported, "cuptiProfilerDeviceSupported",
                          why.empty() ? "not supported" : why});
    }
  }

  auto chip = params<CUpti_Device_GetChipName_Params>(CUpti_Device_GetChipName_Params_STRUCT_SIZE);
  chip.deviceIndex = static_cast<size_t>(device_);
  check(cuptiDeviceGetChipName(&chip), "cuptiDeviceGetChipName");
  chip_ = chip.pChipName ? chip.pChipName : "";

  auto avail = params<CUpti_Profiler_GetCounterAvailability_Params>(
      CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE);
  avail.ctx = ctx_;
  check(cuptiProfilerGetCounterAvailability(&avail), "cuptiProfilerGetCounterAvailability");
  availability_.resize(avail.counterAvailabilityImageSize);
  avail.pCounterAvailabilityImage = availability_.data();
  check(cuptiProfilerGetCounterAvailability(&avail), "cuptiProfilerGetCounterAvailability");
}

RangeProfiler::~RangeProfiler() {
  if (!initialized_) return;
  auto p =
      params<CUpti_Profiler_DeInitialize_Params>(CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE);
  cuptiProfilerDeInitialize(&p);
}

std::vector<ResolvedMetric> RangeProfiler::configure(const std::vector<MetricSpec>& specs) {
  // Each candidate alone on a scratch host object: a name the chip does not know fails there and
  // only there. After a failure the scratch object is made afresh (its state is not documented).
  auto probe = std::make_unique<HostObject>(chip_, availability_);
  std::map<std::string, bool> known;
  auto accepts = [&](const std::string& name) {
    auto it = known.find(name);
    if (it != known.end()) return it->second;
    const bool ok = probe->add({name.c_str()}) == CUPTI_SUCCESS;
    if (!ok) probe = std::make_unique<HostObject>(chip_, availability_);
    return known[name] = ok;
  };
  resolved_ = resolve_metrics(specs, accepts);
  probe.reset();
  names_ = accepted_names(resolved_);
  if (names_.empty())
    throw CuptiFailure({CounterState::kFailed, "cuptiProfilerHostConfigAddMetrics",
                        "the chip " + chip_ + " accepts none of the metric names"});

  HostObject host(chip_, availability_);
  check(host.add(c_strings(names_)), "cuptiProfilerHostConfigAddMetrics");
  auto size = params<CUpti_Profiler_Host_GetConfigImageSize_Params>(
      CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE);
  size.pHostObject = host.get();
  check(cuptiProfilerHostGetConfigImageSize(&size), "cuptiProfilerHostGetConfigImageSize");
  config_.assign(size.configImageSize, 0);
  auto image = params<CUpti_Profiler_Host_GetConfigImage_Params>(
      CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE);
  image.pHostObject = host.get();
  image.configImageSize = config_.size();
  image.pConfigImage = config_.data();
  check(cuptiProfilerHostGetConfigImage(&image), "cuptiProfilerHostGetConfigImage");
  auto passes = params<CUpti_Profiler_Host_GetNumOfPasses_Params>(
      CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE);
  passes.configImageSize = config_.size();
  passes.pConfigImage = config_.data();
  check(cuptiProfilerHostGetNumOfPasses(&passes), "cuptiProfilerHostGetNumOfPasses");
  passes_ = passes.numOfPasses;
  return resolved_;
}

std::vector<LaunchMetrics> RangeProfiler::profile(const std::function<void()>& region) {
  if (names_.empty()) throw std::logic_error("RangeProfiler::profile before configure");
  std::vector<const char*> names = c_strings(names_);
  std::vector<uint8_t> data;
  {
    EnabledProfiler rp(ctx_);
    auto size = params<CUpti_RangeProfiler_GetCounterDataSize_Params>(
        CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE);
    size.pRangeProfilerObject = rp.get();
    size.pMetricNames = names.data();
    size.numMetrics = names.size();
    size.maxNumOfRanges = kMaxRanges;
    size.maxNumRangeTreeNodes = kMaxRanges;
    check(cuptiRangeProfilerGetCounterDataSize(&size), "cuptiRangeProfilerGetCounterDataSize");
    data.assign(size.counterDataSize, 0);
    auto init = params<CUpti_RangeProfiler_CounterDataImage_Initialize_Params>(
        CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE);
    init.pRangeProfilerObject = rp.get();
    init.counterDataSize = data.size();
    init.pCounterData = data.data();
    check(cuptiRangeProfilerCounterDataImageInitialize(&init),
          "cuptiRangeProfilerCounterDataImageInitialize");

    auto config = params<CUpti_RangeProfiler_SetConfig_Params>(
        CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE);
    config.pRangeProfilerObject = rp.get();
    config.configSize = config_.size();
    config.pConfig = config_.data();
    config.counterDataImageSize = data.size();
    config.pCounterDataImage = data.data();
    config.range = CUPTI_AutoRange;
    config.replayMode = CUPTI_KernelReplay;
    config.maxRangesPerPass = kMaxRanges;
    config.numNestingLevels = 1;
    config.minNestingLevel = 1;
    config.passIndex = 0;
    config.targetNestingLevel = 1;
    check(cuptiRangeProfilerSetConfig(&config), "cuptiRangeProfilerSetConfig");

    auto start =
        params<CUpti_RangeProfiler_Start_Params>(CUpti_RangeProfiler_Start_Params_STRUCT_SIZE);
    start.pRangeProfilerObject = rp.get();
    check(cuptiRangeProfilerStart(&start), "cuptiRangeProfilerStart");
    std::exception_ptr failed;
    try {
      region();
    } catch (...) {
      failed = std::current_exception();
    }
    auto stop =
        params<CUpti_RangeProfiler_Stop_Params>(CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE);
    stop.pRangeProfilerObject = rp.get();
    const CUptiResult stopped = cuptiRangeProfilerStop(&stop);
    if (failed) std::rethrow_exception(failed);
    check(stopped, "cuptiRangeProfilerStop");

    auto decode = params<CUpti_RangeProfiler_DecodeData_Params>(
        CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE);
    decode.pRangeProfilerObject = rp.get();
    check(cuptiRangeProfilerDecodeData(&decode), "cuptiRangeProfilerDecodeData");
    if (decode.numOfRangeDropped > 0)
      throw CuptiFailure({CounterState::kFailed, "cuptiRangeProfilerDecodeData",
                          std::to_string(decode.numOfRangeDropped) +
                              " kernel launches dropped (more than " + std::to_string(kMaxRanges) +
                              " in one region)"});
  }

  auto info = params<CUpti_RangeProfiler_GetCounterDataInfo_Params>(
      CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE);
  info.pCounterDataImage = data.data();
  info.counterDataImageSize = data.size();
  check(cuptiRangeProfilerGetCounterDataInfo(&info), "cuptiRangeProfilerGetCounterDataInfo");

  HostObject host(chip_, availability_);
  check(host.add(names), "cuptiProfilerHostConfigAddMetrics");
  std::vector<LaunchMetrics> out;
  for (size_t range = 0; range < info.numTotalRanges; ++range) {
    auto ri = params<CUpti_RangeProfiler_CounterData_GetRangeInfo_Params>(
        CUpti_RangeProfiler_CounterData_GetRangeInfo_Params_STRUCT_SIZE);
    ri.pCounterDataImage = data.data();
    ri.counterDataImageSize = data.size();
    ri.rangeIndex = range;
    ri.rangeDelimiter = "/";
    LaunchMetrics launch;
    launch.kernel = cuptiRangeProfilerCounterDataGetRangeInfo(&ri) == CUPTI_SUCCESS
                        ? demangle(ri.rangeName)
                        : "range " + std::to_string(range);

    // All metrics in one call; when that fails, one by one so that one bad metric costs only
    // itself.
    auto evaluate = [&](const std::vector<const char*>& which, double* values) {
      auto e = params<CUpti_Profiler_Host_EvaluateToGpuValues_Params>(
          CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE);
      e.pHostObject = host.get();
      e.pCounterDataImage = data.data();
      e.counterDataImageSize = data.size();
      e.rangeIndex = range;
      e.ppMetricNames = const_cast<const char**>(which.data());
      e.numMetrics = which.size();
      e.pMetricValues = values;
      return cuptiProfilerHostEvaluateToGpuValues(&e);
    };
    std::vector<double> values(names.size(), 0.0);
    std::vector<bool> ok(names.size(), true);
    if (evaluate(names, values.data()) != CUPTI_SUCCESS)
      for (size_t i = 0; i < names.size(); ++i)
        ok[i] = evaluate({names[i]}, &values[i]) == CUPTI_SUCCESS;
    std::map<std::string, double> by_name;
    for (size_t i = 0; i < names.size(); ++i)
      if (ok[i]) by_name[names_[i]] = values[i];
    for (const ResolvedMetric& m : resolved_) {
      auto it = by_name.find(m.name);
      if (!m.name.empty() && it != by_name.end()) launch.values[m.spec.key] = it->second;
    }
    out.push_back(std::move(launch));
  }
  return out;
}

}  // namespace hetplan::profiler::metrics
