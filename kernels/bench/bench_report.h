// What the benchmark found for one case at one shape, and its two views: a text table and the
// versioned JSON file (schema "hetplan.kernel_bench/1").
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "kernels/bench/bench_timing.h"
#include "kernels/registry.h"

namespace hetplan::kernels::bench {

struct Result {
  const Case* kernel = nullptr;
  Shape shape;
  std::string status;  // "ok", "incorrect", "unsupported", "error"
  std::string detail;  // the check's lines, or why it did not run
  double check_rel_l2 = 0;
  Work work;
  Timing timing;
};

// Device, versions, date and command line: the provenance block of the JSON.
nlohmann::json device_context(int argc, char** argv);

// The largest copy rate among the probes' results (bytes read + written per second), 0 if none.
double copy_bandwidth_GBps(const std::vector<Result>& results);

nlohmann::json to_json(const std::vector<Result>& results, const nlohmann::json& context);
// One line per result: case, shape, time, GB/s, % of copy bandwidth, TFLOP/s, status.
std::string table(const std::vector<Result>& results);

}  // namespace hetplan::kernels::bench
