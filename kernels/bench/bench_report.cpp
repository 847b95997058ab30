#include "kernels/bench/bench_report.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "costmodel/utc_time.h"
#include "kernels/cuda_check.h"

namespace hetplan::kernels::bench {
namespace {

double gbps(const Result& r) {
  return r.timing.median_s > 0 ? r.work.bytes / r.timing.median_s / 1e9 : 0;
}
double tflops(const Result& r) {
  return r.timing.median_s > 0 ? r.work.flops / r.timing.median_s / 1e12 : 0;
}

}  // namespace

nlohmann::json device_context(int argc, char** argv) {
  int device = 0, driver = 0, runtime = 0;
  HETPLAN_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp p{};
  HETPLAN_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  HETPLAN_CUDA_CHECK(cudaDriverGetVersion(&driver));
  HETPLAN_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  std::string command;
  for (int i = 0; i < argc; ++i) {
    if (i) command += ' ';
    command += argv[i];
  }
  return {{"gpu", p.name},
          {"compute_capability", std::to_string(p.major) + "." + std::to_string(p.minor)},
          {"sm_count", p.multiProcessorCount},
          {"l2_bytes", p.l2CacheSize},
          {"memory_bytes", p.totalGlobalMem},
          {"driver_version", driver},
          {"runtime_version", runtime},
          {"host", host},
          {"date", hetplan::utc_now_iso8601()},
          {"command", command},
          {"source", "measured"}};
}

double copy_bandwidth_GBps(const std::vector<Result>& results) {
  double best = 0;
  for (const Result& r : results)
    if (r.status == "ok" && (r.kernel->name == "copy_probe" || r.kernel->name == "memcpy_d2d"))
      best = std::max(best, gbps(r));
  return best;
}

nlohmann::json to_json(const std::vector<Result>& results, const nlohmann::json& context) {
  const double copy = copy_bandwidth_GBps(results);
  nlohmann::json out = {{"schema", "hetplan.kernel_bench/1"},
                        {"context", context},
                        {"copy_GBps", copy},
                        {"results", nlohmann::json::array()}};
  for (const Result& r : results) {
    nlohmann::json shape = nlohmann::json::object();
    for (size_t i = 0; i < r.shape.size(); ++i) shape[r.kernel->dims[i]] = r.shape[i];
    nlohmann::json j = {{"case", r.kernel->name},
                        {"family", r.kernel->family},
                        {"pass", r.kernel->pass},
                        {"dtype", std::string(dtype_name(r.kernel->dtype))},
                        {"bound", r.kernel->bound == Bound::kMemory ? "memory" : "compute"},
                        {"note", r.kernel->note},
                        {"shape", shape},
                        {"shape_text", shape_string(*r.kernel, r.shape)},
                        {"status", r.status},
                        {"check", r.detail},
                        {"bytes", r.work.bytes},
                        {"flops", r.work.flops}};
    if (r.status == "ok") {
      j["check_rel_l2"] = r.check_rel_l2;
      j["time_s"] = r.timing.median_s;
      j["time_min_s"] = r.timing.min_s;
      j["time_max_s"] = r.timing.max_s;
      j["samples"] = r.timing.samples;
      j["runs_per_sample"] = r.timing.runs_per_sample;
      j["instances"] = r.timing.instances;
      j["GBps"] = gbps(r);
      j["pct_of_copy"] = copy > 0 ? 100.0 * gbps(r) / copy : 0.0;
      if (r.work.flops > 0) j["TFLOPs"] = tflops(r);
      if (!r.timing.clocks.empty()) j["clocks"] = hetplan::to_json(r.timing.clocks);
    }
    out["results"].push_back(j);
  }
  return out;
}

std::string table(const std::vector<Result>& results) {
  const double copy = copy_bandwidth_GBps(results);
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "%-28s %-44s %11s %9s %7s %8s %7s  %s\n", "case", "shape",
                "time_us", "GB/s", "%copy", "TFLOP/s", "SM_MHz", "status");
  out += line;
  for (const Result& r : results) {
    const std::string shape = shape_string(*r.kernel, r.shape);
    if (r.status != "ok") {
      std::string why = r.detail.substr(0, r.detail.find('\n'));
      std::snprintf(line, sizeof line, "%-28s %-44s %11s %9s %7s %8s %7s  %s: %s\n",
                    r.kernel->name.c_str(), shape.c_str(), "-", "-", "-", "-", "-",
                    r.status.c_str(), why.substr(0, 120).c_str());
    } else {
      char tf[16] = "-";
      if (r.work.flops > 0) std::snprintf(tf, sizeof tf, "%.1f", tflops(r));
      // The median SM clock, with "*" where NVML named a power or thermal reason.
      char mhz[16] = "-";
      if (!r.timing.clocks.empty())
        std::snprintf(mhz, sizeof mhz, "%.0f%s", r.timing.clocks.sm_mhz_median,
                      r.timing.clocks.power_thermal_samples > 0 ? "*" : "");
      std::snprintf(line, sizeof line, "%-28s %-44s %11.1f %9.1f %6.1f%% %8s %7s  ok\n",
                    r.kernel->name.c_str(), shape.c_str(), r.timing.median_s * 1e6, gbps(r),
                    copy > 0 ? 100.0 * gbps(r) / copy : 0.0, tf, mhz);
    }
    out += line;
  }
  std::snprintf(line, sizeof line, "copy bandwidth (best of copy_probe, memcpy_d2d): %.1f GB/s\n",
                copy);
  out += line;
  out += "SM_MHz: median SM clock while the case ran (NVML); *: a power or thermal limit held it\n";
  return out;
}

}  // namespace hetplan::kernels::bench
