// What hetplan_kernel_metrics measured, as data: the run's provenance, whether hardware counters
// could be read (and why not), the metrics resolved on this chip, and per kernel case the
// event-timed run and the counters of each kernel launch. Written as JSON and as a table; no
// CUDA here, so that the CPU tests cover the formatting and the derived numbers.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "profiler/metrics/metric_catalog.h"

namespace hetplan::profiler::metrics {

// Whether the range profiler delivered counters.
enum class CounterState {
  kCollected,    // counters read
  kDisabled,     // --no-counters
  kRestricted,   // CUPTI_ERROR_INSUFFICIENT_PRIVILEGES (NVreg_RestrictProfilingToAdminUsers)
  kUnsupported,  // the device or its configuration cannot be profiled (vGPU, MIG, too old)
  kFailed,       // another CUPTI error
};
const char* state_name(CounterState s);

struct CounterStatus {
  CounterState state = CounterState::kCollected;
  std::string call;    // the CUPTI call that failed, e.g. "cuptiRangeProfilerEnable"
  std::string detail;  // CUPTI's result name and string, the unsupported feature, ...
};
// One paragraph for the user: what failed, what it means, what still ran, how to fix it.
// `admin_only` is the RmProfilingAdminOnly value of /proc/driver/nvidia/params ("" unknown).
std::string counter_status_message(const CounterStatus& s, const std::string& admin_only);

// The counters of one kernel launch (one auto range of the range profiler).
struct LaunchMetrics {
  std::string kernel;                    // demangled and shortened kernel name
  std::map<std::string, double> values;  // by metric key; absent when not evaluated
  std::optional<double> get(const std::string& key) const;
};

// One kernel case at one shape.
struct CaseResult {
  std::string name;           // registry name, or "cublaslt_gemm_bf16"
  std::string shape;          // "batch=4,heads=16,..."
  std::string status = "ok";  // "ok", "not supported: ...", "error: ..."
  double work_bytes = 0;      // what one run must move at least
  double work_flops = 0;
  int timed_runs = 0;
  double event_us_median = 0;  // CUDA-event time of one run (no profiler attached)
  std::vector<LaunchMetrics> launches;
  std::string counters_error;  // this case's profiling failed (the others may have worked)

  // Sum of a metric over the launches; nullopt when no launch has it.
  std::optional<double> total(const std::string& key) const;
};

struct Provenance {
  std::string gpu, chip, pci_bus_id;
  int cc_major = 0, cc_minor = 0, sm_count = 0;
  int64_t sm_clock_peak_mhz = 0, memory_clock_peak_mhz = 0;
  std::string driver, cuda_driver_api, cuda_runtime, cupti_version;
  std::string profiling_admin_only;  // RmProfilingAdminOnly of /proc/driver/nvidia/params
  std::string command, date_utc, host, tool_version;
};

struct Report {
  Provenance provenance;
  CounterStatus counters;
  size_t passes = 0;  // replay passes per kernel launch the metric set needs
  std::vector<ResolvedMetric> metrics;
  std::vector<CaseResult> cases;
};

// Numbers derived from one launch's counters (nullopt where an input is missing).
struct Derived {
  std::optional<double> dram_bytes;         // read + write
  std::optional<double> l2_red_bytes;       // reduction sectors x 32
  std::optional<double> smem_conflict_pct;  // bank conflicts / wavefronts x 100
  std::optional<double> duration_us;
  std::optional<double> sm_clock_mhz;
  std::vector<std::pair<std::string, double>> stalls;  // reason, cycles/issue; largest first
};
Derived derive(const LaunchMetrics& l);

// The stall reasons of a launch, largest first, at most `n`: "long_scoreboard 3.1, barrier 1.2".
std::string top_stalls(const LaunchMetrics& l, size_t n);

// "void foo<int>(float*)" -> "foo<int>", shortened to `max` characters with "..." in the middle.
std::string short_kernel_name(const std::string& demangled, size_t max = 48);

nlohmann::json to_json(const Report& r);
// The readable table: provenance, counter status, then per case a line and a row per launch.
std::string render_table(const Report& r);

}  // namespace hetplan::profiler::metrics
