#include "cli/command.h"

namespace hetplan::cli {

// One declaration and one table line per command (cli/cmd_<name>.cpp).
CommandRunner declare_models(CLI::App& app);
CommandRunner declare_clusters(CLI::App& app);
CommandRunner declare_predict(CLI::App& app);
CommandRunner declare_search(CLI::App& app);
CommandRunner declare_provision(CLI::App& app);
CommandRunner declare_merge(CLI::App& app);
CommandRunner declare_calibrate_collectives(CLI::App& app);
CommandRunner declare_fit_collectives(CLI::App& app);
CommandRunner declare_import(CLI::App& app);
CommandRunner declare_export(CLI::App& app);
CommandRunner declare_report(CLI::App& app);

const std::vector<CommandSpec>& all_commands() {
  static const std::vector<CommandSpec> kCommands = {
      {"models", "List the model presets", declare_models},
      {"clusters", "List the GPU, node and cluster presets", declare_clusters},
      {"predict", "Predict one strategy's iteration time, throughput, MFU and memory", declare_predict},
      {"search", "Search ranked training strategies for a model on a cluster", declare_search},
      {"provision", "Choose which GPUs to rent: node mixes ranked by throughput and cost",
       declare_provision},
      {"merge", "Merge calibration files (ranks, runs, node kinds, networks) into one",
       declare_merge},
      {"calibrate-collectives",
       "Measure NCCL collectives, the p2p matrix and host-device copies (one node, or several "
       "processes under mpirun/srun)",
       declare_calibrate_collectives},
      {"fit-collectives",
       "Fit latency and bandwidth (two regimes) per collective, group and link from calibrations",
       declare_fit_collectives},
      {"import", "Import training logs (measurements) or other tools' profiles (calibration)",
       declare_import},
      {"export", "Write a strategy as Megatron-LM arguments, a DeepSpeed or a torchtitan config",
       declare_export},
      {"report", "Predicted against measured, as one self-contained HTML file", declare_report},
  };
  return kCommands;
}

}  // namespace hetplan::cli
