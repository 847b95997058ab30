#include "profiler/common/nvml.h"

#include <dlfcn.h>

#include <stdexcept>

#include <fmt/format.h>

namespace hetplan::profiler {
namespace {

// nvml.h's values (NVML API reference): nvmlReturn_t, nvmlClockType_t.
constexpr int kNvmlSuccess = 0;
constexpr int kNvmlErrorNotSupported = 3;
constexpr int kNvmlClockSm = 1;

}  // namespace

struct Nvml::Api {
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  const char* (*error_string)(int) = nullptr;
  int (*driver_version)(char*, unsigned) = nullptr;
  int (*by_pci_bus_id)(const char*, void**) = nullptr;
  int (*clock_info)(void*, int, unsigned*) = nullptr;
  int (*power_usage)(void*, unsigned*) = nullptr;
  int (*event_reasons)(void*, unsigned long long*) = nullptr;

  std::string message(const char* call, int status) const {
    const char* text = error_string ? error_string(status) : nullptr;
    return fmt::format("{}: {} (NVML error {})", call, text ? text : "unknown", status);
  }
};

Nvml::Nvml(const std::string& library) : api_(std::make_unique<Api>()) {
  lib_ = dlopen(library.c_str(), RTLD_LAZY | RTLD_LOCAL);
  if (lib_ == nullptr) {
    const char* e = dlerror();
    why_ = fmt::format("NVML not loaded ({})", e ? e : library + " not found");
    return;
  }
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib_, name));
  };
  Api& a = *api_;
  sym(a.init, "nvmlInit_v2");
  sym(a.shutdown, "nvmlShutdown");
  sym(a.error_string, "nvmlErrorString");
  sym(a.driver_version, "nvmlSystemGetDriverVersion");
  sym(a.by_pci_bus_id, "nvmlDeviceGetHandleByPciBusId_v2");
  sym(a.clock_info, "nvmlDeviceGetClockInfo");
  sym(a.power_usage, "nvmlDeviceGetPowerUsage");
  // Renamed in NVML 12.2 (driver 535); the old name stays for older drivers.
  sym(a.event_reasons, "nvmlDeviceGetCurrentClocksEventReasons");
  if (a.event_reasons == nullptr) sym(a.event_reasons, "nvmlDeviceGetCurrentClocksThrottleReasons");
  if (!a.init || !a.shutdown || !a.by_pci_bus_id || !a.clock_info) {
    why_ = "NVML lacks nvmlInit_v2, nvmlDeviceGetHandleByPciBusId_v2 or nvmlDeviceGetClockInfo";
    return;
  }
  if (const int s = a.init(); s != kNvmlSuccess) {
    why_ = a.message("nvmlInit_v2", s);
    return;
  }
  ok_ = true;
}

Nvml::~Nvml() {
  if (ok_) api_->shutdown();
  if (lib_) dlclose(lib_);
}

std::string Nvml::driver_version() const {
  if (!ok_ || !api_->driver_version) return "";
  char buf[96] = {};
  return api_->driver_version(buf, sizeof(buf)) == kNvmlSuccess ? std::string(buf) : "";
}

Nvml::Device Nvml::device_by_pci_bus_id(const std::string& bus_id) const {
  if (!ok_) throw std::runtime_error(why_);
  void* d = nullptr;
  if (const int s = api_->by_pci_bus_id(bus_id.c_str(), &d); s != kNvmlSuccess)
    throw std::runtime_error(
        api_->message(fmt::format("nvmlDeviceGetHandleByPciBusId_v2(\"{}\")", bus_id).c_str(), s));
  return d;
}

unsigned Nvml::sm_clock_mhz(Device d) const {
  unsigned mhz = 0;
  if (const int s = api_->clock_info(d, kNvmlClockSm, &mhz); s != kNvmlSuccess)
    throw std::runtime_error(api_->message("nvmlDeviceGetClockInfo(SM)", s));
  return mhz;
}

std::optional<double> Nvml::power_w(Device d) const {
  if (!api_->power_usage) return std::nullopt;
  unsigned mw = 0;
  const int s = api_->power_usage(d, &mw);
  if (s == kNvmlErrorNotSupported) return std::nullopt;
  if (s != kNvmlSuccess) throw std::runtime_error(api_->message("nvmlDeviceGetPowerUsage", s));
  return mw * 1e-3;
}

std::optional<uint64_t> Nvml::clock_event_reasons(Device d) const {
  if (!api_->event_reasons) return std::nullopt;
  unsigned long long bits = 0;
  const int s = api_->event_reasons(d, &bits);
  if (s == kNvmlErrorNotSupported) return std::nullopt;
  if (s != kNvmlSuccess)
    throw std::runtime_error(api_->message("nvmlDeviceGetCurrentClocksEventReasons", s));
  return static_cast<uint64_t>(bits);
}

}  // namespace hetplan::profiler
