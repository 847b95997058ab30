// Megatron-LM training logs into measurements: the arguments block gives the strategy, the
// iteration lines the iteration times, the memory report lines the peak memory per stage.
// Formats (megatron/training/arguments.py _print_args, training.py training_log, utils.py
// report_memory):
//   ------------------------ arguments ------------------------
//     tensor_model_parallel_size ...................... 2
//   -------------------- end of arguments ---------------------
//    iteration       10/     100 | consumed samples: 640 | elapsed time per iteration (ms): 351.2 |
//      ... | global batch size:    64 | lm loss: 1.0E+01 | ...
//   [Rank 0] (after 10 iterations) memory (MB) | allocated: 5012.1 | max allocated: 9120.4 |
//      reserved: 10240.0 | max reserved: 10240.0
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "costmodel/measurements.h"
#include "report/import/import_options.h"

namespace hetplan {

struct MegatronLog {
  std::map<std::string, std::string> args;  // the arguments block: name -> value as printed
  int64_t args_line = 0;
  struct Iteration {
    int64_t iteration = 0, train_iters = 0;
    double elapsed_ms = 0;     // mean over the log interval ending at `iteration`
    int64_t global_batch = 0;  // 0 when the line does not say
    int64_t line = 0;
  };
  std::vector<Iteration> iterations;
  struct Memory {
    int64_t rank = 0, after = 0;
    double allocated_mb = 0, max_allocated_mb = 0, reserved_mb = 0, max_reserved_mb = 0;
    int64_t line = 0;
  };
  std::vector<Memory> memory;
  int64_t oom_line = 0;  // first line reporting CUDA out of memory; 0 when none
};

// Parses one log (rank 0's output, or all ranks' output interleaved). Throws InputError naming
// `origin` and the line for a malformed iteration, memory or argument line.
MegatronLog parse_megatron_log(std::string_view text, const std::string& origin);

// The measurement one log describes: its strategy (model check against `options.model` when
// given), the distribution of the iteration times after warm-up, the peak memory per stage.
Measurement megatron_measurement(const MegatronLog& log, const std::string& origin,
                                 const LogImportOptions& options);

// One measurement per log file.
MeasurementsFile import_megatron_logs(const std::vector<std::filesystem::path>& logs,
                                      const LogImportOptions& options);

}  // namespace hetplan
