#include "profiler/common/clock_monitor.h"

#include <chrono>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

namespace hetplan::profiler {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

std::unique_ptr<ClockMonitor> ClockMonitor::open_nvml(const std::string& pci_bus_id, bool enabled,
                                                      const std::string& library) {
  if (!enabled) return unavailable("clocks not read (--no-clocks)");
  auto nvml = std::make_shared<Nvml>(library);
  if (!nvml->ok()) return unavailable("clocks not read: " + nvml->why());
  Nvml::Device device = nullptr;
  try {
    device = nvml->device_by_pci_bus_id(pci_bus_id);
    (void)nvml->sm_clock_mhz(device);  // fails here, not in the first measurement
  } catch (const std::exception& e) {
    return unavailable(fmt::format("clocks not read: {}", e.what()));
  }
  const Nvml* api = nvml.get();
  auto m = std::make_unique<ClockMonitor>(
      [api, device]() -> ClockRead {
        try {
          const auto t0 = Clock::now();
          ClockSample s;
          s.sm_mhz = api->sm_clock_mhz(device);
          s.reasons = api->clock_event_reasons(device).value_or(0);
          s.power_w = api->power_w(device);
          s.read_s = seconds_since(t0);
          return {s, ""};
        } catch (const std::exception& e) {
          return {std::nullopt, e.what()};
        }
      },
      kClockIntervalS, "NVML");
  m->keep_alive_ = std::move(nvml);
  return m;
}

ClockMonitor::ClockMonitor(ReadFn read, double interval_s, std::string source)
    : read_(std::move(read)),
      interval_s_(interval_s),
      source_(std::move(source)),
      available_(true) {}

std::unique_ptr<ClockMonitor> ClockMonitor::unavailable(std::string reason) {
  std::unique_ptr<ClockMonitor> m(new ClockMonitor());
  m->reason_ = std::move(reason);
  return m;
}

ClockMonitor::~ClockMonitor() = default;

std::string ClockMonitor::describe() const {
  if (!available_) return reason_;
  return fmt::format("clocks read through {} every {:g} ms during each timed region", source_,
                     interval_s_ * 1e3);
}

void ClockMonitor::read_into(std::vector<ClockSample>& out) {
  ClockRead r = read_();
  if (r.sample) {
    failures_ = 0;
    out.push_back(*r.sample);
    return;
  }
  if (++failures_ >= kClockMaxFailures) {
    available_ = false;
    reason_ = fmt::format("clocks no longer read after {} failed readings in a row: {}", failures_,
                          r.error);
  }
}

void ClockMonitor::read_while(const std::function<bool()>& busy,
                              std::vector<ClockSample>& readings) {
  if (!available_) return;
  read_into(readings);
  auto last = Clock::now();
  while (available_ && busy()) {
    if (seconds_since(last) >= interval_s_) {
      last = Clock::now();
      read_into(readings);
      continue;
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(kClockPollS));
  }
}

ClockSummary ClockMonitor::watch(const std::function<bool()>& busy) {
  std::vector<ClockSample> readings;
  read_while(busy, readings);
  return summarize_clocks(readings);
}

}  // namespace hetplan::profiler
