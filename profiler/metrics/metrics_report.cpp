#include "profiler/metrics/metrics_report.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace hetplan::profiler::metrics {
namespace {

std::string fixed(std::optional<double> v, int decimals) {
  if (!v) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, *v);
  return buf;
}

std::optional<double> scaled(std::optional<double> v, double by) {
  if (!v) return std::nullopt;
  return *v * by;
}

std::string pad(const std::string& s, size_t width, bool right) {
  if (s.size() >= width) return s;
  const std::string fill(width - s.size(), ' ');
  return right ? fill + s : s + fill;
}

}  // namespace

const char* state_name(CounterState s) {
  switch (s) {
    case CounterState::kCollected:
      return "collected";
    case CounterState::kDisabled:
      return "disabled";
    case CounterState::kRestricted:
      return "restricted";
    case CounterState::kUnsupported:
      return "unsupported";
    case CounterState::kFailed:
      return "failed";
  }
  return "failed";
}

std::string counter_status_message(const CounterStatus& s, const std::string& admin_only) {
  const std::string where = s.call.empty() ? "" : " (" + s.call + ": " + s.detail + ")";
  switch (s.state) {
    case CounterState::kCollected:
      return "hardware counters: collected";
    case CounterState::kDisabled:
      return "hardware counters: not collected (--no-counters); event timings only";
    case CounterState::kRestricted:
      return "hardware counters: restricted to admin users on this machine" + where +
             ". The NVIDIA driver's NVreg_RestrictProfilingToAdminUsers is on (" +
             (admin_only.empty() ? std::string("RmProfilingAdminOnly unreadable")
                                 : "RmProfilingAdminOnly: " + admin_only) +
             " in /proc/driver/nvidia/params), so CUPTI returned "
             "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES. No counters were collected; the event timings "
             "need none and were measured. To allow counters: run as root with CAP_SYS_ADMIN, or "
             "load the driver with NVreg_RestrictProfilingToAdminUsers=0 "
             "(https://developer.nvidia.com/ERR_NVGPUCTRPERM).";
    case CounterState::kUnsupported:
      return "hardware counters: this device or configuration cannot be profiled" + where +
             "; event timings only.";
    case CounterState::kFailed:
      return "hardware counters: CUPTI failed" + where + "; event timings only.";
  }
  return "";
}

std::optional<double> LaunchMetrics::get(const std::string& key) const {
  auto it = values.find(key);
  if (it == values.end()) return std::nullopt;
  return it->second;
}

std::optional<double> CaseResult::total(const std::string& key) const {
  std::optional<double> sum;
  for (const LaunchMetrics& l : launches)
    if (auto v = l.get(key)) sum = sum.value_or(0) + *v;
  return sum;
}

Derived derive(const LaunchMetrics& l) {
  Derived d;
  const auto rd = l.get("dram_read_bytes"), wr = l.get("dram_write_bytes");
  if (rd && wr) d.dram_bytes = *rd + *wr;
  d.l2_red_bytes = scaled(l.get("l2_red_sectors"), 32);
  const auto wf = l.get("smem_wavefronts"), bc = l.get("smem_bank_conflicts");
  if (wf && bc && *wf > 0) d.smem_conflict_pct = 100 * *bc / *wf;
  d.duration_us = scaled(l.get("duration_ns"), 1e-3);
  d.sm_clock_mhz = scaled(l.get("sm_clock_hz"), 1e-6);
  for (const auto& [key, value] : l.values)
    if (key.rfind("stall_", 0) == 0) d.stalls.emplace_back(key.substr(6), value);
  std::stable_sort(d.stalls.begin(), d.stalls.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return d;
}

std::string top_stalls(const LaunchMetrics& l, size_t n) {
  const Derived d = derive(l);
  std::string out;
  for (size_t i = 0; i < d.stalls.size() && i < n; ++i)
    out += (i ? ", " : "") + d.stalls[i].first + " " + fixed(d.stalls[i].second, 2);
  return out.empty() ? "-" : out;
}

std::string short_kernel_name(const std::string& demangled, size_t max) {
  std::string s = demangled;
  // Drop the return type ("void ") and the parameter list: the template arguments stay.
  if (s.rfind("void ", 0) == 0) s = s.substr(5);
  // Our own namespace says nothing in a table of our kernels.
  for (size_t at; (at = s.find("hetplan::kernels::")) != std::string::npos;) s.erase(at, 18);
  int depth = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<') ++depth;
    if (s[i] == '>') --depth;
    if (s[i] == '(' && depth == 0) {
      s = s.substr(0, i);
      break;
    }
  }
  if (max < 8 || s.size() <= max) return s;
  const size_t head = (max - 3) / 2, tail = max - 3 - head;
  return s.substr(0, head) + "..." + s.substr(s.size() - tail);
}

nlohmann::json to_json(const Report& r) {
  using nlohmann::json;
  const Provenance& p = r.provenance;
  json out;
  out["tool"] = "hetplan_kernel_metrics";
  out["provenance"] = {
      {"gpu", p.gpu},
      {"chip", p.chip},
      {"pci_bus_id", p.pci_bus_id},
      {"compute_capability", std::to_string(p.cc_major) + "." + std::to_string(p.cc_minor)},
      {"sm_count", p.sm_count},
      {"sm_clock_peak_mhz", p.sm_clock_peak_mhz},
      {"memory_clock_peak_mhz", p.memory_clock_peak_mhz},
      {"driver", p.driver},
      {"cuda_driver_api", p.cuda_driver_api},
      {"cuda_runtime", p.cuda_runtime},
      {"cupti", p.cupti_version},
      {"profiling_admin_only", p.profiling_admin_only},
      {"command", p.command},
      {"date_utc", p.date_utc},
      {"host", p.host},
      {"version", p.tool_version}};
  out["counters"] = {{"state", state_name(r.counters.state)},
                     {"call", r.counters.call},
                     {"detail", r.counters.detail},
                     {"message", counter_status_message(r.counters, p.profiling_admin_only)},
                     {"passes", r.passes}};
  json metrics = json::array();
  for (const ResolvedMetric& m : r.metrics)
    metrics.push_back({{"key", m.spec.key},
                       {"group", m.spec.group},
                       {"unit", m.spec.unit},
                       {"name", m.name.empty() ? json(nullptr) : json(m.name)},
                       {"rejected", m.rejected}});
  out["metrics"] = metrics;
  json cases = json::array();
  for (const CaseResult& c : r.cases) {
    json launches = json::array();
    for (const LaunchMetrics& l : c.launches) {
      const Derived d = derive(l);
      json derived = json::object();
      if (d.dram_bytes) derived["dram_bytes"] = *d.dram_bytes;
      if (d.l2_red_bytes) derived["l2_red_bytes"] = *d.l2_red_bytes;
      if (d.smem_conflict_pct) derived["smem_conflict_pct"] = *d.smem_conflict_pct;
      launches.push_back({{"kernel", l.kernel}, {"values", l.values}, {"derived", derived}});
    }
    json jc = {{"case", c.name},
               {"shape", c.shape},
               {"status", c.status},
               {"work_bytes", c.work_bytes},
               {"work_flops", c.work_flops},
               {"timed_runs", c.timed_runs},
               {"event_us_median", c.event_us_median},
               {"launches", launches}};
    if (!c.counters_error.empty()) jc["counters_error"] = c.counters_error;
    cases.push_back(std::move(jc));
  }
  out["cases"] = cases;
  return out;
}

std::string render_table(const Report& r) {
  const Provenance& p = r.provenance;
  std::ostringstream os;
  os << "GPU " << p.gpu << " (" << p.chip << ", sm_" << p.cc_major << p.cc_minor << ", "
     << p.sm_count << " SMs, peak " << p.sm_clock_peak_mhz << " MHz), driver " << p.driver
     << ", CUDA runtime " << p.cuda_runtime << ", CUPTI " << p.cupti_version << ", " << p.date_utc
     << "\n";
  os << counter_status_message(r.counters, p.profiling_admin_only) << "\n";
  if (r.counters.state == CounterState::kCollected) {
    std::string missing;
    size_t resolved = 0;
    for (const ResolvedMetric& m : r.metrics) {
      if (m.name.empty())
        missing += (missing.empty() ? "" : ", ") + m.spec.key;
      else
        ++resolved;
    }
    os << resolved << " of " << r.metrics.size() << " metrics known to this chip, " << r.passes
       << " replay passes per launch";
    if (!missing.empty()) os << "; not known (left out): " << missing;
    os << "\n";
  }
  const std::vector<std::pair<std::string, size_t>> cols = {
      {"kernel", 44}, {"us", 9},
      {"MHz", 5},     {"tensor%", 7},
      {"gmma%", 6},   {"occ%", 5},
      {"issue%", 6},  {"smemMwf", 8},
      {"confl%", 6},  {"L1MB", 8},
      {"L2MB", 8},    {"DRAMMB", 8},
      {"redMB", 7},   {"top stalls (cycles/issue)", 0}};
  std::string header;
  for (size_t i = 0; i < cols.size(); ++i)
    header += (i ? " " : "  ") + pad(cols[i].first, cols[i].second, i != 0 && cols[i].second);
  for (const CaseResult& c : r.cases) {
    os << "\n" << c.name << " " << c.shape << ": ";
    if (c.status != "ok") {
      os << c.status << "\n";
      continue;
    }
    os << "event median " << fixed(c.event_us_median, 1) << " us over " << c.timed_runs << " runs";
    if (c.work_flops > 0 && c.event_us_median > 0)
      os << ", " << fixed(c.work_flops / (c.event_us_median * 1e6), 1) << " TFLOP/s";
    else if (c.work_bytes > 0 && c.event_us_median > 0)
      os << ", " << fixed(c.work_bytes / (c.event_us_median * 1e3), 1) << " GB/s of its minimum "
         << fixed(c.work_bytes / 1e6, 1) << " MB";
    auto rd = c.total("dram_read_bytes"), wr = c.total("dram_write_bytes");
    if (rd && wr && c.work_bytes > 0)
      os << "; DRAM moved " << fixed((*rd + *wr) / c.work_bytes, 3) << "x that minimum";
    os << "\n";
    if (!c.counters_error.empty()) os << "  counters: " << c.counters_error << "\n";
    if (c.launches.empty()) continue;
    os << header << "\n";
    for (const LaunchMetrics& l : c.launches) {
      const Derived d = derive(l);
      const std::vector<std::string> cells = {short_kernel_name(l.kernel, 44),
                                              fixed(d.duration_us, 1),
                                              fixed(d.sm_clock_mhz, 0),
                                              fixed(l.get("tensor_pct"), 1),
                                              fixed(l.get("tensor_gmma_pct"), 1),
                                              fixed(l.get("occupancy_pct"), 1),
                                              fixed(l.get("issue_pct"), 1),
                                              fixed(scaled(l.get("smem_wavefronts"), 1e-6), 2),
                                              fixed(d.smem_conflict_pct, 1),
                                              fixed(scaled(l.get("l1_bytes"), 1e-6), 1),
                                              fixed(scaled(l.get("l2_bytes"), 1e-6), 1),
                                              fixed(scaled(d.dram_bytes, 1e-6), 1),
                                              fixed(scaled(d.l2_red_bytes, 1e-6), 1),
                                              top_stalls(l, 3)};
      std::string row;
      for (size_t i = 0; i < cols.size(); ++i)
        row += (i ? " " : "  ") + pad(cells[i], cols[i].second, i != 0 && cols[i].second);
      os << row << "\n";
    }
  }
  return os.str();
}

}  // namespace hetplan::profiler::metrics
