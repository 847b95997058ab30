// DeepSpeed training logs into measurements. Read (deepspeed/runtime/pipe/engine.py,
// runtime/utils.py see_memory_usage, utils/timer.py ThroughputTimer, runtime/config.py print):
//   steps: 20 loss: 6.8712 iter time (s): 0.412 samples/sec: 155.340
//   MA 3.21 GB         Max_MA 7.95 GB         CA 8.5 GB         Max_CA 9 GB
//   epoch=0/micro_step=10/global_step=10, RunningAvgSamplesPerSec=530.1, CurrSamplesPerSec=528.9,
//     MemAllocated=3.21GB, MaxMemAllocated=7.95GB
//   DeepSpeedEngine configuration: ... json = { "train_batch_size": 64, ... }
//   RANK=0 STAGE=0 LAYERS=14 [0, 14) STAGE_PARAMS=... (pipeline stages)
//   DeepSpeed info: version=0.16.4, ...
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "costmodel/document.h"
#include "costmodel/measurements.h"
#include "report/import/import_options.h"

namespace hetplan {

struct DeepSpeedLog {
  struct Step {
    int64_t step = 0;
    double iter_s = 0;  // mean over steps_per_print steps
    int64_t line = 0;
  };
  std::vector<Step> steps;  // pipeline engine "steps:" lines
  struct Throughput {
    int64_t step = 0;
    double samples_per_s = 0;  // of the last step before the line
    int64_t line = 0;
  };
  std::vector<Throughput> throughput;  // ThroughputTimer lines (the engine without pipeline)
  double max_allocated_bytes = -1, max_reserved_bytes = -1;  // -1: not reported
  Json config;  // the printed config JSON; null when absent
  int64_t config_line = 0;
  std::map<std::string, std::string> engine_config;  // "name ..... value" lines of the config print
  int64_t pipeline_stages = 0;                       // from "RANK=r STAGE=s" lines; 0 when none
  // The lowest rank each stage's "RANK=r STAGE=s" lines name, and the line: DeepSpeed numbers
  // ranks stage first (rank = stage x dp x tp + data x tp + model), so stage s starts at
  // s x dp x tp.
  std::map<int64_t, std::pair<int64_t, int64_t>> stage_first_rank;  // stage -> (rank, line)
  std::string version;
  int64_t oom_line = 0;
};

// Parses one log. Throws InputError naming `origin` and the line for a malformed step, memory or
// config line.
DeepSpeedLog parse_deepspeed_log(std::string_view text, const std::string& origin);

// The measurement one log describes. DeepSpeed does not log the model shape: `options.model` is
// required; tensor and pipeline widths come from the log where it prints them, else the options.
Measurement deepspeed_measurement(const DeepSpeedLog& log, const std::string& origin,
                                  const LogImportOptions& options);

MeasurementsFile import_deepspeed_logs(const std::vector<std::filesystem::path>& logs,
                                       const LogImportOptions& options);

}  // namespace hetplan
