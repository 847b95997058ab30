// hetplan_kernel_bench: checks, then times, every registered kernel case at its benchmark
// shapes (or its test shapes with --test-shapes) on the current GPU; prints a table and writes
// JSON. Memory-bound cases are reported as a percentage of the best device-to-device copy rate
// measured in the same run; compute-bound ones (attention) in TFLOP/s; each with the median SM
// clock it ran at (NVML, profiler/common/clock_monitor.h).
//
//   hetplan_kernel_bench [--json FILE] [--filter SUBSTRING]... [--test-shapes] [--samples N]
//                        [--max-seconds S] [--list] [--no-clocks]
#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>

#include "kernels/bench/bench_report.h"
#include "kernels/bench/bench_timing.h"
#include "kernels/cuda_check.h"
#include "kernels/registry.h"
#include "profiler/common/clock_monitor.h"

namespace hetplan::kernels::bench {
namespace {

bool selected(const Case& c, const std::vector<std::string>& filters) {
  if (filters.empty()) return true;
  for (const std::string& f : filters)
    if (c.name.find(f) != std::string::npos || c.family == f) return true;
  return false;
}

// Error strings of CUDA faults after which the context is unusable.
bool sticky(const std::string& what) {
  for (const char* s :
       {"cudaErrorIllegalAddress", "cudaErrorLaunchFailure", "cudaErrorIllegalInstruction",
        "cudaErrorMisalignedAddress", "cudaErrorHardwareStackError", "cudaErrorAssert"})
    if (what.find(s) != std::string::npos) return true;
  return false;
}

Result measure(const Case& c, const Shape& shape, uint64_t seed, size_t rotate_bytes,
               const TimingOptions& timing, cudaStream_t stream, bool& context_lost) {
  Result r{&c, shape, "ok", "", 0, c.work(shape), {}};
  if (std::string why = c.unsupported(shape); !why.empty()) {
    r.status = "unsupported";
    r.detail = why;
    return r;
  }
  try {
    std::vector<std::unique_ptr<Instance>> instances;
    instances.push_back(c.make(shape, seed));
    const CheckResult check = instances[0]->check();
    r.detail = check.detail;
    r.check_rel_l2 = check.worst_rel_l2;
    if (!check.passed) {
      r.status = "incorrect";
      return r;
    }
    // More instances, while their memory stays under the rotation target and the device keeps
    // a quarter of its memory free.
    const size_t one = std::max<size_t>(instances[0]->device_bytes(), 1);
    while (instances.size() < 16 && instances.size() * one < rotate_bytes) {
      size_t free = 0, total = 0;
      HETPLAN_CUDA_CHECK(cudaMemGetInfo(&free, &total));
      if (free < one + total / 4) break;
      instances.push_back(c.make(shape, seed + 1000 * instances.size()));
    }
    // The instances' random fills ran on the default stream; timing runs on another.
    HETPLAN_CUDA_CHECK(cudaDeviceSynchronize());
    r.timing = time_runs(instances, stream, timing);
  } catch (const std::invalid_argument& e) {
    r.status = "unsupported";
    r.detail = e.what();
  } catch (const std::exception& e) {
    r.status = "error";
    r.detail = e.what();
    context_lost = sticky(e.what());
  }
  return r;
}

int run(int argc, char** argv) {
  CLI::App app{"Checks and times every kernel case of kernels/ on the current GPU."};
  std::string json_path = "kernel_bench.json";
  std::vector<std::string> filters;
  bool test_shapes = false, list = false;
  TimingOptions timing;
  app.add_option("--json", json_path, "Write the results here");
  app.add_option("--filter", filters,
                 "Only cases whose name contains this (or family equal); repeatable");
  app.add_flag("--test-shapes", test_shapes, "Use the small test shapes (a quick smoke run)");
  app.add_option("--samples", timing.max_samples, "Timing samples per case and shape at most");
  app.add_option("--max-seconds", timing.max_seconds, "Timed seconds per case and shape at most");
  app.add_flag("--list", list, "List the cases and their shapes, run nothing");
  bool no_clocks = false;
  app.add_flag("--no-clocks", no_clocks, "Do not read the SM clock (NVML) while cases run");
  CLI11_PARSE(app, argc, argv);

  if (list) {
    for (const Case& c : all_cases()) {
      if (!selected(c, filters)) continue;
      std::printf("%-28s %-16s %s\n", c.name.c_str(), c.pass.c_str(), c.note.c_str());
      for (const Shape& s : test_shapes ? c.test_shapes : c.bench_shapes)
        std::printf("    %s\n", shape_string(c, s).c_str());
    }
    return 0;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "hetplan_kernel_bench: no CUDA device visible\n");
    return 1;
  }
  nlohmann::json context = device_context(argc, argv);
  int l2 = 0;
  HETPLAN_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
  const size_t rotate_bytes = 3 * static_cast<size_t>(l2);
  std::fprintf(stderr, "%s, %d SMs, L2 %d MB: rotating instances up to %zu MB per case\n",
               context["gpu"].get<std::string>().c_str(), context["sm_count"].get<int>(), l2 >> 20,
               rotate_bytes >> 20);

  char bus_id[32] = {};
  HETPLAN_CUDA_CHECK(cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, 0));
  const auto clocks = profiler::ClockMonitor::open_nvml(bus_id, !no_clocks);
  std::fprintf(stderr, "%s\n", clocks->describe().c_str());
  context["clocks"] = clocks->describe();
  timing.clocks = clocks.get();

  Stream stream;
  std::vector<Result> results;
  bool context_lost = false;
  uint64_t seed = 1;
  for (const Case& c : all_cases()) {
    // The copy probes always run: they are the yardstick of the percentages.
    if (!selected(c, filters) && c.family != "bandwidth") continue;
    for (const Shape& s : test_shapes ? c.test_shapes : c.bench_shapes) {
      if (context_lost) {
        results.push_back({&c,
                           s,
                           "error",
                           "not run: an earlier CUDA fault left the context unusable",
                           0,
                           c.work(s),
                           {}});
        continue;
      }
      results.push_back(
          measure(c, s, seed += 7919, rotate_bytes, timing, stream.get(), context_lost));
      const Result& r = results.back();
      std::fprintf(stderr, "%-28s %-44s %s %s\n", c.name.c_str(), shape_string(c, s).c_str(),
                   r.status.c_str(), r.status == "ok" ? "" : r.detail.substr(0, 200).c_str());
      // Rewritten after every result, so that a run cut short still leaves its numbers.
      std::ofstream(json_path) << to_json(results, context).dump(2) << "\n";
    }
  }
  std::cout << table(results);
  std::fprintf(stderr, "wrote %s\n", json_path.c_str());
  int bad = 0;
  for (const Result& r : results) bad += r.status == "incorrect" || r.status == "error";
  return bad ? 1 : 0;
}

}  // namespace
}  // namespace hetplan::kernels::bench

int main(int argc, char** argv) {
  try {
    return hetplan::kernels::bench::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hetplan_kernel_bench: %s\n", e.what());
    return 1;
  }
}
