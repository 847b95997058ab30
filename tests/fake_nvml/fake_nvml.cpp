// A stand-in for libnvidia-ml.so.1 in CPU tests: the few NVML calls hetplan makes
// (profiler/common/nvml.h), with the signatures and return codes of NVML's reference, answering
// from state the test sets through fake_nvml_set(). One device, at bus id "0000:00:06.0".
#include <cstring>

extern "C" {

enum { kSuccess = 0, kUninitialized = 1, kNotSupported = 3, kNotFound = 6, kGpuIsLost = 15 };

static int g_initialised = 0;
static unsigned g_sm_mhz = 1980;
static unsigned g_power_mw = 0;  // 0: not supported
static unsigned long long g_reasons = 0;
static int g_clock_calls_left = -1;  // >= 0: that many succeed, then GPU lost
static int g_device = 0;

void fake_nvml_set(unsigned sm_mhz, unsigned power_mw, unsigned long long reasons,
                   int clock_calls_left) {
  g_sm_mhz = sm_mhz;
  g_power_mw = power_mw;
  g_reasons = reasons;
  g_clock_calls_left = clock_calls_left;
}

int nvmlInit_v2(void) {
  g_initialised = 1;
  return kSuccess;
}
int nvmlShutdown(void) {
  g_initialised = 0;
  return kSuccess;
}
const char* nvmlErrorString(int status) {
  switch (status) {
    case kSuccess:
      return "Success";
    case kUninitialized:
      return "Uninitialized";
    case kNotSupported:
      return "Not Supported";
    case kNotFound:
      return "Not Found";
    case kGpuIsLost:
      return "GPU is lost";
    default:
      return "Unknown Error";
  }
}
int nvmlSystemGetDriverVersion(char* version, unsigned length) {
  if (!g_initialised) return kUninitialized;
  std::strncpy(version, "580.159.04", length);
  return kSuccess;
}
int nvmlDeviceGetHandleByPciBusId_v2(const char* bus_id, void** device) {
  if (!g_initialised) return kUninitialized;
  // NVML takes the domain in 4 or 8 hex digits (torch's properties give the 8-digit form).
  if (std::strcmp(bus_id, "0000:00:06.0") != 0 && std::strcmp(bus_id, "00000000:00:06.0") != 0)
    return kNotFound;
  *device = &g_device;
  return kSuccess;
}
int nvmlDeviceGetClockInfo(void* device, int type, unsigned* mhz) {
  if (device != &g_device || type != 1) return kNotSupported;  // 1: NVML_CLOCK_SM
  if (g_clock_calls_left == 0) return kGpuIsLost;
  if (g_clock_calls_left > 0) --g_clock_calls_left;
  *mhz = g_sm_mhz;
  return kSuccess;
}
int nvmlDeviceGetPowerUsage(void* device, unsigned* mw) {
  if (device != &g_device) return kNotFound;
  if (g_power_mw == 0) return kNotSupported;
  *mw = g_power_mw;
  return kSuccess;
}
int nvmlDeviceGetCurrentClocksEventReasons(void* device, unsigned long long* reasons) {
  if (device != &g_device) return kNotFound;
  *reasons = g_reasons;
  return kSuccess;
}

}  // extern "C"
