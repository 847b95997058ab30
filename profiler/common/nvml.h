// NVML, loaded at run time: it comes with the driver, not the toolkit (CUDA 13's has no nvml.h),
// so hetplan starts and its CPU tests run where there is none. Only the few calls hetplan makes:
// the driver's version, and one device's SM clock, power draw and clocks-event reasons.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace hetplan::profiler {

// The driver's NVML library, as the loader finds it.
inline constexpr const char* kNvmlLibrary = "libnvidia-ml.so.1";

class Nvml {
 public:
  // Loads `library` and initialises it; ok() false (with why()) where either fails. Tests give
  // another library (tests/fake_nvml).
  explicit Nvml(const std::string& library = kNvmlLibrary);
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  bool ok() const { return ok_; }
  const std::string& why() const { return why_; }

  std::string driver_version() const;  // "580.159.04"; "" on failure

  using Device = void*;  // nvmlDevice_t
  // The device at a PCI bus id as CUDA gives it ("0000:00:06.0"); throws std::runtime_error with
  // NVML's message where it has none.
  Device device_by_pci_bus_id(const std::string& bus_id) const;

  // One reading each; a failed call throws std::runtime_error with NVML's message, except where
  // the device does not support the query: then std::nullopt.
  unsigned sm_clock_mhz(Device d) const;
  std::optional<double> power_w(Device d) const;
  std::optional<uint64_t> clock_event_reasons(Device d) const;

 private:
  struct Api;
  std::unique_ptr<Api> api_;
  void* lib_ = nullptr;
  bool ok_ = false;
  std::string why_;
};

}  // namespace hetplan::profiler
