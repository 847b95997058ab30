// Reads the GPU's SM clock, power draw and clocks-event reasons while a timed region runs, so that
// every timing says which clock it saw (costmodel/clocks.h). The timing code enqueues its region,
// then, instead of blocking until the region's last event, calls watch(): a reading at once and one
// every interval until the event completes. The readings are taken while the device runs the
// measured work and cost the device nothing; the host was only waiting.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "costmodel/clocks.h"
#include "profiler/common/nvml.h"

namespace hetplan::profiler {

// NVML refreshes the SM clock on the driver's own period; 2 ms gives a 20 ms GEMM timing about
// ten readings. What a reading costs the host is not known before a GPU has run this (each record
// keeps it: read_us_median); the host only waits meanwhile.
inline constexpr double kClockIntervalS = 2e-3;
// How often watch() asks whether the region has finished (a late answer stretches the run, not
// the timing).
inline constexpr double kClockPollS = 100e-6;
// Consecutive failed readings after which the monitor turns itself off.
inline constexpr int kClockMaxFailures = 3;

// One reading, or why there is none.
struct ClockRead {
  std::optional<ClockSample> sample;
  std::string error;
};

class ClockMonitor {
 public:
  using ReadFn = std::function<ClockRead()>;

  // The GPU at `pci_bus_id` (as cudaDeviceGetPCIBusId gives it) through NVML (`library`: the
  // driver's, or a test's stand-in); unavailable, with the reason, where NVML or the device
  // cannot be opened or `enabled` is false (--no-clocks).
  static std::unique_ptr<ClockMonitor> open_nvml(const std::string& pci_bus_id, bool enabled,
                                                 const std::string& library = kNvmlLibrary);
  // Readings from `read` (tests, other sources).
  ClockMonitor(ReadFn read, double interval_s, std::string source);
  // A monitor that reads nothing.
  static std::unique_ptr<ClockMonitor> unavailable(std::string reason);
  ~ClockMonitor();
  ClockMonitor(const ClockMonitor&) = delete;
  ClockMonitor& operator=(const ClockMonitor&) = delete;

  bool available() const { return available_; }
  const std::string& unavailable_reason() const { return reason_; }
  // "NVML every 2 ms during each timed region" or why not, for the provenance notes.
  std::string describe() const;

  // Reads once, then every interval while `busy()` holds, appending to `readings` (nothing when
  // unavailable). A failed reading is skipped; kClockMaxFailures in a row turn the monitor off
  // with NVML's message as the reason.
  void read_while(const std::function<bool()>& busy, std::vector<ClockSample>& readings);
  // The same, summarised.
  ClockSummary watch(const std::function<bool()>& busy);

 private:
  ClockMonitor() = default;
  void read_into(std::vector<ClockSample>& out);

  ReadFn read_;
  double interval_s_ = kClockIntervalS;
  std::string source_;
  bool available_ = false;
  std::string reason_;
  int failures_ = 0;
  std::shared_ptr<void> keep_alive_;  // what read_ uses (the NVML library)
};

}  // namespace hetplan::profiler
