// The hardware metrics hetplan_kernel_metrics asks CUPTI's range profiler for, grouped by the
// question they answer about a kernel (docs/kernels.md "Hardware counters of our kernels").
//
// A metric has a short key (what the JSON and the table use) and one or more candidate names in
// the metric vocabulary of Nsight Compute / CUPTI (Perfworks). Names differ between chips and
// CUPTI versions and most were not tried on hardware when this was written, so the profiler
// resolves each key to the first candidate the chip accepts and reports the keys none of whose
// candidates it knows, instead of failing.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace hetplan::profiler::metrics {

struct MetricSpec {
  std::string key;                      // e.g. "dram_read_bytes"
  std::string group;                    // e.g. "memory"
  std::string unit;                     // "ns", "bytes", "%", "count", ...
  std::string meaning;                  // one line for --list-metrics
  std::vector<std::string> candidates;  // metric names, preferred first
};

// The groups in table order: time, tensor, pipes, smem, memory, l2red, occupancy, issue, stalls.
const std::vector<std::string>& metric_groups();
// Every metric of every group, in group order.
const std::vector<MetricSpec>& metric_catalog();
// The warp-stall reasons of Hopper's scheduler statistics (gmma and imc_miss exist only up to
// sm_90); each is a metric "stall_<reason>" of group "stalls".
const std::vector<std::string>& stall_reasons();

// The metrics of the named groups ("all" is every group), in catalog order. Throws InputError
// naming an unknown group and listing the known ones.
std::vector<MetricSpec> select_metrics(const std::vector<std::string>& groups);

// A key resolved to the metric name the chip accepts; empty `name` when no candidate was accepted
// (then `rejected` lists the candidates tried).
struct ResolvedMetric {
  MetricSpec spec;
  std::string name;
  std::vector<std::string> rejected;
};

// Resolves every spec with `accepts` (true when the chip knows a metric name), trying candidates
// in order.
std::vector<ResolvedMetric> resolve_metrics(const std::vector<MetricSpec>& specs,
                                            const std::function<bool(const std::string&)>& accepts);

// The accepted names, each once, in order: what the config image is built from.
std::vector<std::string> accepted_names(const std::vector<ResolvedMetric>& resolved);

}  // namespace hetplan::profiler::metrics
