#include "cli/command.h"

namespace hetplan::cli {

// One declaration and one table line per command (cli/cmd_<name>.cpp).
CommandRunner declare_models(CLI::App& app);
CommandRunner declare_clusters(CLI::App& app);
CommandRunner declare_frameworks(CLI::App& app);
CommandRunner declare_predict(CLI::App& app);
CommandRunner declare_search(CLI::App& app);
CommandRunner declare_provision(CLI::App& app);
CommandRunner declare_merge(CLI::App& app);
CommandRunner declare_calibrate(CLI::App& app);
CommandRunner declare_calibrate_collectives(CLI::App& app);
CommandRunner declare_fit_collectives(CLI::App& app);
CommandRunner declare_serve(CLI::App& app);
CommandRunner declare_fit(CLI::App& app);
CommandRunner declare_model_info(CLI::App& app);
CommandRunner declare_measure(CLI::App& app);
CommandRunner declare_import(CLI::App& app);
CommandRunner declare_export(CLI::App& app);
CommandRunner declare_simulate(CLI::App& app);
CommandRunner declare_report(CLI::App& app);

const std::vector<CommandSpec>& all_commands() {
  static const std::vector<CommandSpec> kCommands = {
      {"models", "List the model presets", declare_models},
      {"clusters", "List the GPU, node and cluster presets", declare_clusters},
      {"frameworks", "List the training frameworks, or show one (what it runs, its sources)",
       declare_frameworks},
      {"predict", "Predict one strategy's iteration time, throughput, MFU and memory",
       declare_predict},
      {"search", "Search ranked training strategies for a model on a cluster", declare_search},
      {"provision", "Choose which GPUs to rent: node mixes ranked by throughput and cost",
       declare_provision},
      {"merge", "Merge calibration files (ranks, runs, node kinds, networks) into one",
       declare_merge},
      {"calibrate",
       "Measure this GPU (GEMMs, kernels, layers, collectives) into a calibration file",
       declare_calibrate},
      {"calibrate-collectives",
       "Measure NCCL collectives, the p2p matrix and host-device copies (one node, or several "
       "processes under mpirun/srun)",
       declare_calibrate_collectives},
      {"fit-collectives",
       "Fit latency and bandwidth (two regimes) per collective, group and link from calibrations",
       declare_fit_collectives},
      {"serve", "Place a model for serving on heterogeneous GPUs by max flow (Helix)",
       declare_serve},
      {"fit", "Fit calibration files into a profile and score the fit on held-out shapes",
       declare_fit},
      {"model-info", "Print every layer of a model with all its fields (JSON for other tools)",
       declare_model_info},
      {"measure", "Time real training iterations of a strategy with the PyTorch reference harness",
       declare_measure},
      {"import", "Import training logs (measurements) or other tools' profiles (calibration)",
       declare_import},
      {"export",
       "Write a strategy as Megatron-LM arguments, a DeepSpeed or torchtitan config, or Sailor's "
       "topology",
       declare_export},
      {"simulate", "Time one pipeline schedule with the event-driven simulator", declare_simulate},
      {"report", "Predicted against measured, as one self-contained HTML file", declare_report},
  };
  return kCommands;
}

}  // namespace hetplan::cli
